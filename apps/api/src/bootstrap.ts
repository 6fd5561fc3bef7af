import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { addressList, AppConfig, loadConfig } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { AppModule } from './app.module';
import { registerBrowserRequestGuard } from './client/browser-request-guard';
import { configureFastify } from './http-setup';
import { registerHttpMetrics } from './metrics/http-metrics';
import { registerWebClient } from './web/web-client';

/** Builds the api (used by main.ts and by the e2e tests, which pass their own database and prefix). */
export async function createApi(overrides: Partial<AppConfig> = {}): Promise<NestFastifyApplication> {
  const config = Object.assign(loadConfig(), overrides);
  // X-Forwarded-For is believed only from the configured proxies: anyone else could pick the address that
  // rate limits count against. request.ip is then the first address not among them.
  const trustedProxies = addressList(config.TRUSTED_PROXIES);
  const adapter = new FastifyAdapter({ bodyLimit: config.MAX_BODY_BYTES, trustProxy: trustedProxies.length ? trustedProxies : false });
  configureFastify(adapter.getInstance());
  // The request hooks must exist before Nest registers its routes; the Metrics they count into come with the app.
  const made: { metrics?: Metrics } = {};
  registerHttpMetrics(adapter.getInstance(), () => made.metrics);
  registerBrowserRequestGuard(adapter.getInstance(), config.PUBLIC_BASE_URL);
  await registerWebClient(adapter.getInstance(), { captchaScriptUrl: config.RECAPTCHA_SCRIPT_URL });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(overrides), adapter, {
    bodyParser: false,
    abortOnError: false,
    logger: ['error', 'warn', ...(config.LOG_LEVEL === 'log' || config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'verbose' ? (['log'] as const) : [])],
  });
  made.metrics = app.get(Metrics);
  app.enableShutdownHooks();
  return app;
}
