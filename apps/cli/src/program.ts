import { Command } from 'commander';
import { registerApiKeyCommands } from './commands/api-key.command';
import { registerEgressCommands } from './commands/egress.command';
import { registerGroupCommands } from './commands/group.command';
import { registerImageCommands } from './commands/image.command';
import { registerInfrastructureCommands } from './commands/infrastructure.command';
import { registerLicenseCommands } from './commands/license.command';
import { registerSettingsCommands } from './commands/settings.command';
import { registerWebhookCommands } from './commands/webhook.command';

/** The operator's command tree (main.ts runs it; tests drive it in-process). */
export function buildProgram(): Command {
  const program = new Command('workspace-server').description('Operate a workspace-server deployment (reads the same environment as the api)');
  program.exitOverride();
  registerApiKeyCommands(program);
  registerSettingsCommands(program);
  registerInfrastructureCommands(program);
  registerImageCommands(program);
  registerGroupCommands(program);
  registerLicenseCommands(program);
  registerEgressCommands(program);
  registerWebhookCommands(program);
  return program;
}
