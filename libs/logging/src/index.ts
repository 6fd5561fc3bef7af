// What other libraries and the apps use of @ws/logging; everything else is internal to it.
export { logFormat, pinoHttpOptions, REDACT_PATHS, requestIdOf, SECRET_FIELDS } from './log-options';
export type { LogSettings } from './log-options';
export { assignLogFields, LoggingModule, withLogBindings } from './logging.module';
