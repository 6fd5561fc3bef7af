import { Command } from 'commander';
import { SettingsService } from '@ws/settings';
import { print, service } from '../context';

export function registerSettingsCommands(program: Command): void {
  const settings = program.command('settings').description('global settings (session_lifetime, same_site_cookie_policy …)');
  settings
    .command('list')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => print(await (await service(SettingsService)).all(), o.json ?? false));
  settings
    .command('set <name> <value>')
    .description('value is JSON (600, "None"); a bare word is taken as a string')
    .action(async (name: string, raw: string) => {
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        value = raw;
      }
      await (await service(SettingsService)).set(name, value);
      console.log(`${name} = ${JSON.stringify(value)}`);
    });
}
