import { DynamicModule, Global, Module } from '@nestjs/common';
import { LoggerModule, PinoLogger } from 'nestjs-pino';
import { storage, Store } from 'nestjs-pino/storage';
import { AppConfig } from '@ws/common';
import { logFileStream, pinoHttpOptions } from './log-options';

/**
 * pino as Nest's logger (nestjs-pino): JSON lines (LOG_FORMAT), LOG_LEVEL, secrets redacted. In the api every
 * request gets a request id (X-Request-Id kept or made, echoed) carried by every line logged while it is handled.
 * The app calls `app.useLogger(app.get(Logger))` (nestjs-pino's Logger) after creating itself with bufferLogs.
 */
@Global()
@Module({})
export class LoggingModule {
  static forRoot(role: 'api' | 'worker' | 'cli'): DynamicModule {
    return {
      module: LoggingModule,
      imports: [LoggerModule.forRootAsync({
        inject: [AppConfig],
        useFactory: (config: AppConfig) => {
          const options = pinoHttpOptions(config, role);
          return { pinoHttp: config.LOG_FILE ? [options, logFileStream(config.LOG_FILE)] : options, assignResponse: true };
        },
      })],
      exports: [LoggerModule],
    };
  }
}

/**
 * Adds `fields` to every later line of the request (or job) being handled, its `request completed` line included;
 * outside one it does nothing.
 */
export function assignLogFields(fields: Record<string, unknown>): void {
  const store = storage.getStore();
  if (!store) return;
  store.logger = store.logger.child(fields);
  store.responseLogger?.setBindings(fields);
}

/**
 * Runs `fn` with `bindings` on every line it logs (through Nest's Logger or PinoLogger): a job's id, its queue and
 * the ids in its payload. Outside a process that set up LoggingModule it just runs `fn`.
 */
export function withLogBindings<T>(bindings: Record<string, unknown>, fn: () => T): T {
  const root = PinoLogger.root;
  if (!root) return fn();
  return storage.run(new Store(root.child(bindings)), fn);
}
