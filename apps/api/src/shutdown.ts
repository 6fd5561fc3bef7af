import { Injectable, Logger } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppConfig } from '@ws/common';

/** Whether this api process is shutting down: /api/health then answers 503, so a load balancer stops sending it requests. */
@Injectable()
export class ApiShutdown {
  draining = false;
}

/**
 * An api's orderly end on a signal: health answers 503 (ApiShutdown) while the api keeps serving for
 * API_SHUTDOWN_DRAIN_MS, so a balancer takes it out of rotation first; then its HTTP server closes (a request
 * arriving now gets Fastify's 503 with `Connection: close`, one in flight finishes); and only then the app's
 * modules close their PostgreSQL and Redis connections. Nest's own shutdown hooks close the modules first, which
 * failed requests still in flight with a 503 of their own (an ended pool).
 */
export async function shutDownApi(app: NestFastifyApplication, signal: NodeJS.Signals): Promise<void> {
  const logger = new Logger('api');
  const drainMs = app.get(AppConfig).API_SHUTDOWN_DRAIN_MS;
  app.get(ApiShutdown).draining = true;
  logger.log(`${signal}: shutting down${drainMs ? `; serving ${drainMs} ms more while health answers 503` : ''}`);
  if (drainMs > 0) await new Promise((resolve) => setTimeout(resolve, drainMs));
  await app.getHttpAdapter().getInstance().close();
  await app.close();
}
