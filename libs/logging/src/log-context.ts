import pino, { type Logger } from 'pino';
import { storage, Store } from 'nestjs-pino/storage';
import { logFileStream, loggerOptions, type LogSettings } from './log-options';

/**
 * What a request or a job adds to every line logged while it is handled. It rides in nestjs-pino's own async
 * context (so Nest's Logger and PinoLogger write through `logger`), and pino's `mixin` copies `fields` into a
 * line only when one is written: no child logger per request (making one redacts its bindings, which cost more
 * CPU than a hot read's statements).
 */
export class LogContext extends Store {
  constructor(
    logger: Logger,
    readonly fields: Record<string, unknown>,
  ) {
    super(logger);
  }
}

/** The fields of the request or job being handled, for pino's mixin; none outside one. */
function contextFields(): Record<string, unknown> {
  const store = storage.getStore();
  return store instanceof LogContext ? store.fields : {};
}

/**
 * The process's root logger (the last LoggingModule made; every app of one process logs alike). nestjs-pino's
 * PinoLogger.root is set only where its HTTP middleware runs, which the api no longer uses and the worker never did.
 */
let root: Logger | undefined;

/** Makes the root logger from the settings: JSON lines (or pretty), into LOG_FILE when set. */
export function createRootLogger(settings: LogSettings, role: string): Logger {
  const options = loggerOptions(settings, role, contextFields);
  root = settings.LOG_FILE ? pino(options, logFileStream(settings.LOG_FILE)) : pino(options);
  return root;
}

export function rootLogger(): Logger | undefined {
  return root;
}

/** Runs `fn` in a new log context with `fields` (a request's, a job's); outside a process with a root logger it just runs `fn`. */
export function withLogBindings<T>(fields: Record<string, unknown>, fn: () => T): T {
  return root ? storage.run(new LogContext(root, { ...fields }), fn) : fn();
}

/**
 * Adds `fields` to every later line of the request (or job) being handled, its `request completed` line included;
 * outside one it does nothing.
 */
export function assignLogFields(fields: Record<string, unknown>): void {
  const store = storage.getStore();
  if (store instanceof LogContext) Object.assign(store.fields, fields);
}
