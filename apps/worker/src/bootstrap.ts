import { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppConfig, loadConfig } from '@ws/common';
import { WorkerModule } from './worker.module';

/**
 * The worker: an application context (no HTTP) running the queue processors. `shutdownHooks: false` leaves
 * signals to the caller (main.ts bounds the shutdown itself).
 */
export async function createWorker(overrides: Partial<AppConfig> = {}, options: { shutdownHooks?: boolean } = {}): Promise<INestApplicationContext> {
  const config = Object.assign(loadConfig(), overrides);
  const app = await NestFactory.createApplicationContext(WorkerModule.forRoot(overrides), {
    abortOnError: false,
    logger: ['error', 'warn', ...(config.LOG_LEVEL === 'warn' || config.LOG_LEVEL === 'error' ? [] : (['log'] as const))],
  });
  if (options.shutdownHooks ?? true) app.enableShutdownHooks();
  return app;
}
