import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { AppConfig, ConfigError } from '@ws/common';
import { createApi } from './bootstrap';

async function main(): Promise<void> {
  const app = await createApi();
  const config = app.get(AppConfig);
  await app.listen(config.API_PORT, config.API_HOST);
  new Logger('api').log(`workspace-server api listening on http://${config.API_HOST}:${config.API_PORT} (public url ${config.PUBLIC_BASE_URL})`);
}

main().catch((err: Error) => {
  console.error(err instanceof ConfigError ? err.message : `api failed to start: ${err.stack ?? err.message}`);
  process.exit(1);
});
