import { ALL_PERMISSIONS, closure, DEPENDENCIES, isPermission, missingPermissions, Permission, PERMISSION_TABLE, unmetDependencies } from './permissions';
import { OPERATIONS } from './operations';

const held = (...p: Permission[]) => new Set<Permission>(p);

describe('permission catalog', () => {
  it('has every name of the spec table, plus User and Global Admin', () => {
    for (const name of ['Users Auth Session', 'Groups Delete System', 'Connection Proxy Modify', 'Auth Delete', 'DevAPI View',
      'Images Modify Resources', 'Sessions Delete', 'Session Recordings View', 'Settings Modify Theme', 'Licenses Delete',
      'System Export Data', 'Reports View', 'User', 'Global Admin', 'Directory User Management Create']) {
      expect(isPermission(name)).toBe(true);
    }
    expect(isPermission('Users Fly')).toBe(false);
    expect(new Set(ALL_PERMISSIONS).size).toBe(ALL_PERMISSIONS.length);
  });

  it('has a dependency entry for every area permission, and every dependency is a known permission', () => {
    for (const [p, deps] of DEPENDENCIES) {
      expect(isPermission(p)).toBe(true);
      for (const d of deps) expect(isPermission(d)).toBe(true);
    }
  });

  it('every operation names known permissions', () => {
    for (const spec of Object.values(OPERATIONS)) for (const p of spec.permissions) expect(isPermission(p)).toBe(true);
  });
});

describe('rule 1: Modify, Create and Delete need the matching View', () => {
  const areas = Object.entries(PERMISSION_TABLE) as Array<[string, readonly string[]]>;
  it.each(areas.flatMap(([area, actions]) => actions.filter((a) => ['Modify', 'Create', 'Delete'].includes(a)).map((a) => [`${area} ${a}`, `${area} View`])))(
    '%s needs %s',
    (p, view) => {
      expect(closure([p as Permission]).has(view as Permission)).toBe(true);
    },
  );
  it('the IfMember and System families need their own View', () => {
    expect(closure(['Groups Modify IfMember'])).toContain('Groups View IfMember');
    expect(closure(['Groups Modify System'])).toContain('Groups View System');
    expect(closure(['Groups Delete System'])).toContain('Groups View System');
  });
  it('a View needs nothing by itself unless a rule says so', () => {
    expect([...closure(['Users View'])]).toEqual(['Users View']);
  });
});

describe('rule 2: explicit view dependencies', () => {
  it.each([
    ['Licenses View', ['System View']],
    ['Permissions View', ['Groups View']],
    ['Registries View', ['Images View', 'System View', 'Agents View']],
    ['Autoscale View', ['Server Pools View']],
    ['Autoscale Schedule View', ['Server Pools View']],
    ['DNS Providers View', ['Server Pools View']],
    ['VM Provider View', ['Server Pools View', 'Autoscale View']],
  ])('%s needs %p', (p, needs) => {
    const c = closure([p as Permission]);
    for (const n of needs) expect(c).toContain(n);
  });
  it('closes transitively: Licenses Create needs Licenses View and System View', () => {
    expect(missingPermissions(held('Licenses Create'), ['Licenses Create'])).toEqual(['Licenses View', 'System View']);
  });
});

describe('rule 3: Users Delete needs Users Modify', () => {
  it('is part of the closure', () => {
    expect(missingPermissions(held('Users Delete', 'Users View'), ['Users Delete'])).toEqual(['Users Modify']);
  });
});

describe('rule 4: egress gateways and credentials need Egress Providers Modify', () => {
  it.each(['Egress Gateways', 'Egress Credentials'].flatMap((a) => ['Create', 'Modify', 'Delete'].map((x) => [`${a} ${x}`])))('%s', (p) => {
    const c = closure([p as Permission]);
    expect(c).toContain('Egress Providers Modify');
    expect(c).toContain('Egress Providers View');
  });
});

describe('rules 6 and 7', () => {
  it('Users Modify Admin builds on Users Modify', () => {
    expect(closure(['Users Modify Admin'])).toEqual(new Set(['Users Modify Admin', 'Users Modify', 'Users View']));
  });
  it('Images Modify Resources builds on Images Modify', () => {
    expect(closure(['Images Modify Resources'])).toContain('Images Modify');
  });
});

describe('missingPermissions and unmetDependencies', () => {
  it('Global Admin holds every permission', () => {
    for (const p of ALL_PERMISSIONS) expect(missingPermissions(held('Global Admin'), [p])).toEqual([]);
  });
  it('reports exactly what is missing, sorted', () => {
    expect(missingPermissions(held('Users View'), ['Users Create'])).toEqual(['Users Create']);
    expect(missingPermissions(held(), ['Users Auth Session', 'User'])).toEqual(['User', 'Users Auth Session']);
  });
  it('a grant must include its dependencies', () => {
    expect(unmetDependencies(['Users Delete'])).toEqual(['Users Modify', 'Users View']);
    expect(unmetDependencies(['Users Delete', 'Users Modify', 'Users View'])).toEqual([]);
    expect(unmetDependencies(['Global Admin'])).toEqual([]);
  });
});

describe('Queues Admin (the queue dashboard, issue 23)', () => {
  it('is in the catalog, needs nothing else, and Global Admin holds it', () => {
    expect(isPermission('Queues Admin')).toBe(true);
    expect([...closure(['Queues Admin'])]).toEqual(['Queues Admin']);
    expect(unmetDependencies(['Queues Admin'])).toEqual([]);
    expect(missingPermissions(held('Global Admin'), ['Queues Admin'])).toEqual([]);
    expect(missingPermissions(held('System View'), ['Queues Admin'])).toEqual(['Queues Admin']);
  });

  it('no operation needs it', () => {
    for (const spec of Object.values(OPERATIONS)) expect(closure(spec.permissions)).not.toContain('Queues Admin');
  });
});
