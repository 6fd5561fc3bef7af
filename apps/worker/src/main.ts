import 'reflect-metadata';
import { INestApplicationContext, Logger } from '@nestjs/common';
import { AppConfig, ConfigError } from '@ws/common';
import { createWorker } from './bootstrap';

/**
 * Beyond the grace for running jobs: handing the rest back, closing PostgreSQL and Redis. Past it the process
 * exits anyway: a shutdown must end even when some connection or timer would keep it alive.
 */
const CLOSE_MARGIN_MS = 10_000;

function exitOnSignals(app: INestApplicationContext): void {
  const logger = new Logger('worker');
  const graceMs = app.get(AppConfig).WORKER_SHUTDOWN_GRACE_MS;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.log(`${signal}: stopping (running jobs get ${graceMs} ms, then go back to the queue)`);
    setTimeout(() => {
      console.error(`worker: shutdown did not finish within ${graceMs + CLOSE_MARGIN_MS} ms; exiting`);
      process.exit(1);
    }, graceMs + CLOSE_MARGIN_MS).unref();
    app.close().then(
      () => process.exit(0),
      (err: Error) => {
        console.error(`worker: shutdown failed: ${err.stack ?? err.message}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

createWorker({}, { shutdownHooks: false })
  .then((app) => {
    exitOnSignals(app);
    new Logger('worker').log('workspace-server worker started');
  })
  .catch((err: Error) => {
    console.error(err instanceof ConfigError ? err.message : `worker failed to start: ${err.stack ?? err.message}`);
    process.exit(1);
  });
