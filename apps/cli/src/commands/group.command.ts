import { Command } from 'commander';
import { toWireId } from '@ws/common';
import { GroupsService, UsageInterval } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { collect, int, print, service } from '../context';

// commander turns a parser's null into '' (its "no value" filler): "none" stays a word until the action.
type OrNone<T> = T | 'none';
const intOrNone = (v: string): OrNone<number> => (v === 'none' ? 'none' : int(v));
const boolOrNone = (v: string): OrNone<boolean> => {
  if (v === 'none' || v === 'true' || v === 'false') return v === 'none' ? 'none' : v === 'true';
  throw new Error(`expected true, false or none, got ${JSON.stringify(v)}`);
};
const noneToNull = <T>(v: OrNone<T> | undefined): T | null | undefined => (v === 'none' ? null : v);

export function registerGroupCommands(program: Command): void {
  const group = program.command('group').description('user groups and their settings');
  group.command('list').option('--json').action(async (o: { json?: boolean }) => {
    const rows = await (await service(GroupsService)).list();
    print(rows.map((g) => ({
      group_id: toWireId(g.id), name: g.name, priority: g.priority, keepalive_expiration: g.keepaliveExpiration, usage_limit: g.usageLimit,
      usage_interval: g.usageInterval, default_image: toWireId(g.defaultImageId), record_sessions: g.recordSessions, permissions: g.permissions, client_settings: g.clientSettings,
    })), o.json ?? false);
  });
  group
    .command('set <group>')
    .description('change a group\'s settings (group by name or id)')
    .option('--keepalive-expiration <seconds>', 'seconds a keepalive extends a workspace by ("none": deployment default)', intOrNone)
    .option('--usage-limit <seconds>', 'seconds of workspace use per interval ("none": unlimited)', intOrNone)
    .option('--usage-interval <interval>', 'daily, weekly, monthly or total')
    .option('--default-image <image>', 'image id or friendly name ("none" to clear)')
    .option('--priority <n>', 'lower wins when a user\'s groups disagree', int)
    .option('--record-sessions <on>', 'record the members\' stream sessions: true, false, or none (a later group or the default, off, decides)', boolOrNone)
    .option('--client-setting <key=value>', 'e.g. allow_workspace_sharing=false, idle_disconnect=30 (repeat)', collect, [])
    .action(async (ref: string, o: { keepaliveExpiration?: OrNone<number>; usageLimit?: OrNone<number>; usageInterval?: string; defaultImage?: string; priority?: number; recordSessions?: OrNone<boolean>; clientSetting: string[] }) => {
      if (o.usageInterval && !['daily', 'weekly', 'monthly', 'total'].includes(o.usageInterval)) throw new Error('--usage-interval must be daily, weekly, monthly or total');
      const defaultImageId = o.defaultImage === undefined ? undefined : o.defaultImage === 'none' ? null : (await (await service(ImagesService)).findByRef(o.defaultImage)).id;
      const clientSettings = Object.fromEntries(o.clientSetting.map((kv) => {
        const [key, raw] = kv.split('=');
        return [key, raw === 'true' ? true : raw === 'false' ? false : int(raw ?? '')];
      }));
      const g = await (await service(GroupsService)).updateSettings(ref, {
        keepaliveExpiration: noneToNull(o.keepaliveExpiration), usageLimit: noneToNull(o.usageLimit), usageInterval: o.usageInterval as UsageInterval | undefined,
        defaultImageId, priority: o.priority, recordSessions: noneToNull(o.recordSessions), clientSettings: o.clientSetting.length ? clientSettings : undefined,
      });
      console.log(`${g.name}: keepalive_expiration=${g.keepaliveExpiration} usage_limit=${g.usageLimit} usage_interval=${g.usageInterval} default_image=${toWireId(g.defaultImageId)} record_sessions=${g.recordSessions ?? 'none'}`);
    });
}
