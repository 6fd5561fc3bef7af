import { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppConfig } from '@ws/common';
import { Logger } from 'nestjs-pino';
import { WorkerModule } from './worker.module';

/**
 * The worker: an application context (no HTTP) running the queue processors. `shutdownHooks: false` leaves
 * signals to the caller (main.ts bounds the shutdown itself).
 */
export async function createWorker(overrides: Partial<AppConfig> = {}, options: { shutdownHooks?: boolean } = {}): Promise<INestApplicationContext> {
  // Nest's own lines wait for pino (LoggingModule: JSON lines, LOG_LEVEL, LOG_FORMAT; job ids on job lines).
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(overrides), { abortOnError: false, bufferLogs: true });
  app.useLogger(app.get(Logger));
  if (options.shutdownHooks ?? true) app.enableShutdownHooks();
  return app;
}
