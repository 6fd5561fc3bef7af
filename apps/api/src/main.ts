import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { AppConfig, ConfigError } from '@ws/common';
import { createApi } from './bootstrap';

/** A shutdown ends even when a connection (a long-lived stream) keeps the server open: exit this long after the signal. */
const SHUTDOWN_DEADLINE_MS = 15_000;

async function main(): Promise<void> {
  const app = await createApi();
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    // Beside Nest's own shutdown hook (which closes the app, then re-raises the signal).
    process.once(signal, () => {
      setTimeout(() => {
        console.error(`api: shutdown did not finish within ${SHUTDOWN_DEADLINE_MS} ms; exiting`);
        process.exit(1);
      }, SHUTDOWN_DEADLINE_MS).unref();
    });
  }
  const config = app.get(AppConfig);
  await app.listen(config.API_PORT, config.API_HOST);
  new Logger('api').log(`workspace-server api listening on http://${config.API_HOST}:${config.API_PORT} (public url ${config.PUBLIC_BASE_URL})`);
}

main().catch((err: Error) => {
  console.error(err instanceof ConfigError ? err.message : `api failed to start: ${err.stack ?? err.message}`);
  process.exit(1);
});
