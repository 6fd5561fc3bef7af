import { DynamicModule, Global, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { AppConfig } from '@ws/common';
import { createRootLogger } from './log-context';

/**
 * pino as Nest's logger (nestjs-pino's Logger over our root logger): JSON lines (LOG_FORMAT), LOG_LEVEL, secrets
 * redacted. Requests get their log context and `request completed` line from Fastify hooks (request-logging.ts),
 * not from nestjs-pino's pino-http middleware: running Nest middleware on Fastify and a child logger per request
 * cost about a third of a hot read's CPU. The app calls `app.useLogger(app.get(Logger))` after creating itself
 * with bufferLogs.
 */
@Global()
@Module({})
export class LoggingModule {
  static forRoot(role: 'api' | 'worker' | 'cli'): DynamicModule {
    return {
      module: LoggingModule,
      imports: [LoggerModule.forRootAsync({
        inject: [AppConfig],
        // No routes: nestjs-pino registers no middleware.
        useFactory: (config: AppConfig) => ({ pinoHttp: { logger: createRootLogger(config, role) }, forRoutes: [] }),
      })],
      exports: [LoggerModule],
    };
  }
}
