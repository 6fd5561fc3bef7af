import { Injectable, Logger } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppConfig } from '@ws/common';

/** How long the shutdown waits for operations still running once the HTTP server has closed, at most. */
const IN_FLIGHT_WAIT_MS = 10_000;

/**
 * Whether this api process is shutting down (/api/health then answers 503, so a load balancer stops sending it
 * requests), and how many operations are running: a handler whose client went away keeps running after the HTTP
 * server has closed, and must finish before the pools it uses are ended. Counted without a promise per request.
 */
@Injectable()
export class ApiShutdown {
  draining = false;
  private running = 0;
  private onIdle: (() => void) | null = null;

  operationStarted(): void {
    this.running++;
  }

  operationEnded(): void {
    if (--this.running === 0 && this.onIdle) this.onIdle();
  }

  /** Resolves with whether every operation ended within `ms`. */
  operationsEnded(ms: number): Promise<boolean> {
    if (this.running === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.onIdle = null;
        resolve(false);
      }, ms);
      this.onIdle = () => {
        clearTimeout(timer);
        this.onIdle = null;
        resolve(true);
      };
    });
  }

  get operationsRunning(): number {
    return this.running;
  }
}

/**
 * An api's orderly end on a signal: health answers 503 (ApiShutdown) while the api keeps serving for
 * API_SHUTDOWN_DRAIN_MS, so a balancer takes it out of rotation first; then its HTTP server closes (a request
 * arriving now gets Fastify's 503 with `Connection: close`, one in flight finishes); then it waits for operations
 * still running for a client that went away (ApiShutdown, bounded); and only then the app's modules close their
 * PostgreSQL and Redis connections. Nest's own shutdown hooks close the modules first, which
 * failed requests still in flight with a 503 of their own (an ended pool).
 */
export async function shutDownApi(app: NestFastifyApplication, signal: NodeJS.Signals): Promise<void> {
  const logger = new Logger('api');
  const drainMs = app.get(AppConfig).API_SHUTDOWN_DRAIN_MS;
  app.get(ApiShutdown).draining = true;
  logger.log(`${signal}: shutting down${drainMs ? `; serving ${drainMs} ms more while health answers 503` : ''}`);
  if (drainMs > 0) await new Promise((resolve) => setTimeout(resolve, drainMs));
  await app.getHttpAdapter().getInstance().close();
  const shutdown = app.get(ApiShutdown);
  if (!(await shutdown.operationsEnded(IN_FLIGHT_WAIT_MS))) logger.warn(`${shutdown.operationsRunning} operation(s) still running after ${IN_FLIGHT_WAIT_MS} ms; closing anyway`);
  await app.close();
}
