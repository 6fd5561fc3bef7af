import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { ConfigError } from '@ws/common';
import { createWorker } from './bootstrap';

createWorker()
  .then(() => new Logger('worker').log('workspace-server worker started'))
  .catch((err: Error) => {
    console.error(err instanceof ConfigError ? err.message : `worker failed to start: ${err.stack ?? err.message}`);
    process.exit(1);
  });
