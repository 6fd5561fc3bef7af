import { Command } from 'commander';
import { ApiKeysService } from '@ws/auth';
import { formatTimestamp } from '@ws/common';
import { collect, print, service } from '../context';

export function registerApiKeyCommands(program: Command): void {
  const apiKey = program.command('api-key').description('developer API keys');

  apiKey
    .command('create')
    .requiredOption('--name <name>', 'what the key is for')
    .option('--permission <name>', 'a permission to grant (repeat); "Global Admin" grants all', collect, [])
    .option('--expires <date>', 'ISO date after which the key stops working')
    .option('--read-only', 'refuse every operation that writes')
    .option('--json', 'print JSON')
    .action(async (o: { name: string; permission: string[]; expires?: string; readOnly?: boolean; json?: boolean }) => {
      const { key, secret } = await (await service(ApiKeysService)).create({
        name: o.name, permissions: o.permission, expiresAt: o.expires ? new Date(o.expires) : null, readOnly: o.readOnly ?? false,
      });
      print({ api_key: key.apiKey, api_key_secret: secret, ...(o.json ? {} : { permissions: key.permissions.join(', ') || '(none)' }) }, o.json ?? false);
    });

  apiKey
    .command('list')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const keys = await (await service(ApiKeysService)).list();
      print(keys.map((k) => ({ api_key: k.apiKey, name: k.name, permissions: k.permissions, read_only: k.readOnly, expires_at: formatTimestamp(k.expiresAt), created_at: formatTimestamp(k.createdAt) })), o.json ?? false);
    });

  apiKey
    .command('revoke <api_key>')
    .description('the key stops working at once on every api process')
    .action(async (key: string) => {
      await (await service(ApiKeysService)).revoke(key);
      console.log(`revoked ${key}`);
    });

  apiKey
    .command('set-permissions <api_key>')
    .option('--permission <name>', 'a permission (repeat); replaces the current set', collect, [])
    .action(async (key: string, o: { permission: string[] }) => {
      const updated = await (await service(ApiKeysService)).setPermissions(key, o.permission);
      console.log(`${key}: ${updated.permissions.join(', ') || '(none)'}`);
    });
}
