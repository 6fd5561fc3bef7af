import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { OperatorAuthenticator } from '@ws/auth';
import { addressList, AppConfig, loadConfig } from '@ws/common';
import { JobProducer, RedisConnections } from '@ws/queue';
import { registerQueueDashboard } from './admin/queue-dashboard';
import { AppModule } from './app.module';
import { registerBrowserRequestGuard } from './client/browser-request-guard';
import { configureFastify } from './http-setup';
import { registerApiReference } from './openapi/api-reference';
import { registerWebClient } from './web/web-client';

/** Builds the api (used by main.ts and by the e2e tests, which pass their own database and prefix). */
export async function createApi(overrides: Partial<AppConfig> = {}): Promise<NestFastifyApplication> {
  const config = Object.assign(loadConfig(), overrides);
  // X-Forwarded-For is believed only from the configured proxies: anyone else could pick the address that
  // rate limits count against. request.ip is then the first address not among them.
  const trustedProxies = addressList(config.TRUSTED_PROXIES);
  const adapter = new FastifyAdapter({ bodyLimit: config.MAX_BODY_BYTES, trustProxy: trustedProxies.length ? trustedProxies : false });
  configureFastify(adapter.getInstance());
  registerBrowserRequestGuard(adapter.getInstance(), config.PUBLIC_BASE_URL);
  await registerWebClient(adapter.getInstance(), { captchaScriptUrl: config.RECAPTCHA_SCRIPT_URL });
  registerApiReference(adapter.getInstance());
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(overrides), adapter, {
    bodyParser: false,
    abortOnError: false,
    logger: ['error', 'warn', ...(config.LOG_LEVEL === 'log' || config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'verbose' ? (['log'] as const) : [])],
  });
  if (config.QUEUE_DASHBOARD) {
    registerQueueDashboard(adapter.getInstance(), { operators: app.get(OperatorAuthenticator), jobs: app.get(JobProducer), redis: app.get(RedisConnections) }, config.PUBLIC_BASE_URL);
  }
  app.enableShutdownHooks();
  return app;
}
