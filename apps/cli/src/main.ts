import 'reflect-metadata';
import { Command } from 'commander';
import { ApiError, ConfigError } from '@ws/common';
import { registerApiKeyCommands } from './commands/api-key.command';
import { registerGroupCommands } from './commands/group.command';
import { registerImageCommands } from './commands/image.command';
import { registerInfrastructureCommands } from './commands/infrastructure.command';
import { registerSettingsCommands } from './commands/settings.command';
import { closeContext } from './context';

const program = new Command('workspace-server').description('Operate a workspace-server deployment (reads the same environment as the api)');
registerApiKeyCommands(program);
registerSettingsCommands(program);
registerInfrastructureCommands(program);
registerImageCommands(program);
registerGroupCommands(program);

program
  .parseAsync(process.argv)
  .then(() => closeContext())
  .catch(async (err: Error) => {
    console.error(err instanceof ApiError || err instanceof ConfigError ? err.message : `error: ${err.message}`);
    await closeContext().catch(() => undefined);
    process.exit(1);
  });
