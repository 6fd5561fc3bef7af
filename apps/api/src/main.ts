import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { AppConfig, ConfigError } from '@ws/common';
import { createApi } from './bootstrap';
import { shutDownApi } from './shutdown';

/**
 * A shutdown ends even when a connection (a long-lived stream) keeps the server open: exit this long after the
 * signal and the drain (API_SHUTDOWN_DRAIN_MS).
 */
const SHUTDOWN_DEADLINE_MS = 15_000;

async function main(): Promise<void> {
  const app = await createApi();
  const config = app.get(AppConfig);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      setTimeout(() => {
        console.error(`api: shutdown did not finish within ${SHUTDOWN_DEADLINE_MS} ms of the drain; exiting`);
        process.exit(1);
      }, config.API_SHUTDOWN_DRAIN_MS + SHUTDOWN_DEADLINE_MS).unref();
      shutDownApi(app, signal).then(
        () => process.kill(process.pid, signal), // the default action now: the exit status says which signal ended it
        (err: Error) => {
          console.error(`api: shutdown failed: ${err.stack ?? err.message}`);
          process.exit(1);
        },
      );
    });
  }
  await app.listen(config.API_PORT, config.API_HOST);
  new Logger('api').log(`workspace-server api listening on http://${config.API_HOST}:${config.API_PORT} (public url ${config.PUBLIC_BASE_URL})`);
}

main().catch((err: Error) => {
  console.error(err instanceof ConfigError ? err.message : `api failed to start: ${err.stack ?? err.message}`);
  process.exit(1);
});
