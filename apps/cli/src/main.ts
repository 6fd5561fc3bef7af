import 'reflect-metadata';
import { CommanderError } from 'commander';
import { ApiError, ConfigError } from '@ws/common';
import { closeContext } from './context';
import { buildProgram } from './program';

buildProgram()
  .parseAsync(process.argv)
  .then(() => closeContext())
  .catch(async (err: Error) => {
    await closeContext().catch(() => undefined);
    if (err instanceof CommanderError) process.exit(err.exitCode); // commander printed help or the usage error
    console.error(err instanceof ApiError || err instanceof ConfigError ? err.message : `error: ${err.message}`);
    process.exit(1);
  });
