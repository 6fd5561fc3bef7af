import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { OperatorAuthenticator } from '@ws/auth';
import { addressList, AppConfig, loadConfig } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { Logger } from 'nestjs-pino';
import { registerRequestLogging, requestIdOf } from '@ws/logging';
import { JobProducer, RedisConnections } from '@ws/queue';
import { registerQueueDashboard } from './admin/queue-dashboard';
import { AppModule, OPERATION_CONTROLLERS } from './app.module';
import { registerBrowserRequestGuard } from './client/browser-request-guard';
import { configureFastify } from './http-setup';
import { registerRequestLogFields } from './logging/request-log-fields';
import { registerHttpMetrics } from './metrics/http-metrics';
import { registerApiReference } from './openapi/api-reference';
import { registerOperationRoutes } from './public-api/operation-routes';
import { registerWebClient } from './web/web-client';

/** Builds the api (used by main.ts and by the e2e tests, which pass their own database and prefix). */
export async function createApi(overrides: Partial<AppConfig> = {}): Promise<NestFastifyApplication> {
  const config = Object.assign(loadConfig(), overrides);
  // X-Forwarded-For is believed only from the configured proxies: anyone else could pick the address that
  // rate limits count against. request.ip is then the first address not among them.
  const trustedProxies = addressList(config.TRUSTED_PROXIES);
  // Request ids: an incoming X-Request-Id when sane, else a new one; on every log line of the request, echoed back.
  // No Nest middleware: requests are logged and counted by Fastify hooks, so @fastify/middie is not run for each.
  const adapter = new FastifyAdapter({ bodyLimit: config.MAX_BODY_BYTES, trustProxy: trustedProxies.length ? trustedProxies : false, genReqId: requestIdOf, skipMiddie: true });
  // First, so that every later hook logs with the request's id.
  registerRequestLogging(adapter.getInstance());
  registerRequestLogFields(adapter.getInstance());
  adapter.getInstance().addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  configureFastify(adapter.getInstance());
  // The request hooks must exist before Nest registers its routes; the Metrics they count into come with the app.
  const made: { metrics?: Metrics } = {};
  registerHttpMetrics(adapter.getInstance(), () => made.metrics);
  registerBrowserRequestGuard(adapter.getInstance(), config.PUBLIC_BASE_URL);
  await registerWebClient(adapter.getInstance(), { captchaScriptUrl: config.RECAPTCHA_SCRIPT_URL });
  registerApiReference(adapter.getInstance());
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(overrides), adapter, {
    bodyParser: false,
    abortOnError: false,
    // Nest's own lines wait for pino (LoggingModule: JSON lines, LOG_LEVEL, LOG_FORMAT, request ids, redaction).
    bufferLogs: true,
  });
  app.useLogger(app.get(Logger));
  made.metrics = app.get(Metrics);
  registerOperationRoutes(adapter.getInstance(), app, OPERATION_CONTROLLERS);
  if (config.QUEUE_DASHBOARD) {
    registerQueueDashboard(adapter.getInstance(), { operators: app.get(OperatorAuthenticator), jobs: app.get(JobProducer), redis: app.get(RedisConnections) }, config.PUBLIC_BASE_URL);
  }
  // No Nest shutdown hooks: they close the modules (the database pool) while requests are in flight; main.ts
  // ends the process in order (shutdown.ts).
  return app;
}
