/**
 * The permission catalog, as data: every name of the spec's permission table, and the rules that make
 * one permission need others. The guard and the CLI both close over DEPENDENCIES; nothing else encodes them.
 */
const CRUD = ['View', 'Modify', 'Create', 'Delete'] as const;

export const PERMISSION_TABLE = {
  Users: ['View', 'Modify', 'Create', 'Delete', 'Modify Admin', 'Auth Session'],
  Groups: ['View', 'Modify', 'Create', 'Delete', 'View IfMember', 'Modify IfMember', 'View System', 'Modify System', 'Delete System'],
  Agents: CRUD,
  Staging: CRUD,
  Casting: CRUD,
  Webfilters: CRUD,
  Brandings: CRUD,
  Managers: CRUD,
  Zones: CRUD,
  Companies: CRUD,
  'Connection Proxy': CRUD,
  'Physical Tokens': CRUD,
  Servers: CRUD,
  'Server Pools': CRUD,
  Autoscale: CRUD,
  'VM Provider': CRUD,
  'Autoscale Schedule': CRUD,
  'DNS Providers': CRUD,
  Registries: CRUD,
  'Storage Providers': CRUD,
  'Egress Providers': CRUD,
  'Egress Gateways': CRUD,
  'Egress Credentials': CRUD,
  Webhooks: ['View', 'Modify'],
  Banners: CRUD,
  'Directory User Management': CRUD,
  Auth: CRUD,
  DevAPI: CRUD,
  Images: ['View', 'Modify', 'Create', 'Delete', 'Modify Resources'],
  Sessions: ['View', 'Modify', 'Delete'],
  'Session Recordings': ['View'],
  Settings: [
    'View', 'Modify', 'Modify Auth', 'Modify Auth Captcha', 'Modify Cast', 'Modify Images', 'Modify License',
    'Modify Logging', 'Modify Manager', 'Modify Scale', 'Modify Subscription', 'Modify Filter', 'Modify Storage',
    'Modify Connections', 'Modify Theme',
  ],
  Licenses: ['View', 'Create', 'Delete'],
  System: ['View', 'Export Schema', 'Import Data', 'Export Data'],
  Reports: ['View'],
  // Not in the spec's table, but its rule 2 names it ("Permissions View needs Groups View").
  Permissions: ['View'],
  // Not in the spec's table: the operator's queue dashboard (/admin/queues, issue 23). Needs nothing else.
  Queues: ['Admin'],
} as const;

type Table = typeof PERMISSION_TABLE;
type AreaPermission = { [A in keyof Table]: `${A & string} ${Table[A][number]}` }[keyof Table];
export type Permission = AreaPermission | 'User' | 'Global Admin';

export const GLOBAL_ADMIN: Permission = 'Global Admin';

export const ALL_PERMISSIONS: readonly Permission[] = [
  ...Object.entries(PERMISSION_TABLE).flatMap(([area, actions]) => actions.map((a) => `${area} ${a}` as Permission)),
  'User',
  'Global Admin',
];

const KNOWN = new Set<string>(ALL_PERMISSIONS);
export function isPermission(name: string): name is Permission {
  return KNOWN.has(name);
}

/** Rule 1: a Modify, Create or Delete permission needs the matching View (per action family). */
function viewRuleFor(area: string, action: string): Permission[] {
  if (!/^(Modify|Create|Delete)\b/.test(action)) return [];
  if (area === 'Groups' && action.endsWith('IfMember')) return ['Groups View IfMember'];
  if (area === 'Groups' && action.endsWith('System')) return ['Groups View System'];
  return [`${area} View` as Permission];
}

/** Explicit rules of the spec (rules 2-4 and 7), beyond rule 1. */
const EXPLICIT: Array<[Permission, Permission[]]> = [
  ['Licenses View', ['System View']],
  ['Permissions View', ['Groups View']],
  ['Registries View', ['Images View', 'System View', 'Agents View']],
  ['Autoscale View', ['Server Pools View']],
  ['Autoscale Schedule View', ['Server Pools View']],
  ['DNS Providers View', ['Server Pools View']],
  ['VM Provider View', ['Server Pools View', 'Autoscale View']],
  ['Users Delete', ['Users Modify']],
  ['Users Modify Admin', ['Users Modify']],
  ['Images Modify Resources', ['Images Modify']],
  ['Egress Gateways Create', ['Egress Providers Modify']],
  ['Egress Gateways Modify', ['Egress Providers Modify']],
  ['Egress Gateways Delete', ['Egress Providers Modify']],
  ['Egress Credentials Create', ['Egress Providers Modify']],
  ['Egress Credentials Modify', ['Egress Providers Modify']],
  ['Egress Credentials Delete', ['Egress Providers Modify']],
];

/** Direct dependencies of each permission (not closed). */
export const DEPENDENCIES: ReadonlyMap<Permission, readonly Permission[]> = (() => {
  const deps = new Map<Permission, Permission[]>();
  for (const [area, actions] of Object.entries(PERMISSION_TABLE)) {
    for (const action of actions) deps.set(`${area} ${action}` as Permission, viewRuleFor(area, action));
  }
  for (const [permission, needs] of EXPLICIT) deps.set(permission, [...(deps.get(permission) ?? []), ...needs]);
  return deps;
})();

/** The permissions themselves plus everything they need, transitively. */
export function closure(permissions: Iterable<Permission>): Set<Permission> {
  const result = new Set<Permission>();
  const pending = [...permissions];
  while (pending.length > 0) {
    const next = pending.pop() as Permission;
    if (result.has(next)) continue;
    result.add(next);
    pending.push(...(DEPENDENCIES.get(next) ?? []));
  }
  return result;
}

/** What `held` lacks to perform something that needs `required` (empty when allowed). Global Admin holds all. */
export function missingPermissions(held: ReadonlySet<Permission>, required: Iterable<Permission>): Permission[] {
  if (held.has('Global Admin')) return [];
  return [...closure(required)].filter((p) => !held.has(p)).sort();
}

/** For granting: the dependencies of `granted` that `granted` itself does not include. */
export function unmetDependencies(granted: Iterable<Permission>): Permission[] {
  const set = new Set(granted);
  if (set.has('Global Admin')) return [];
  return [...closure(set)].filter((p) => !set.has(p)).sort();
}
