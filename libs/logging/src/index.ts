// What other libraries and the apps use of @ws/logging; everything else is internal to it.
export { logFormat, loggerOptions, REDACT_PATHS, requestIdOf, SECRET_FIELDS } from './log-options';
export type { LogSettings } from './log-options';
export { assignLogFields, withLogBindings } from './log-context';
export { LoggingModule } from './logging.module';
export { registerRequestLogging } from './request-logging';
