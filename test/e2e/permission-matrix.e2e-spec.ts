/**
 * The permission matrix, generated from the operation catalog (libs/auth/src/operations.ts) and the
 * dependency rules (libs/auth/src/permissions.ts): every routed operation is covered without anyone
 * remembering to add it. The guard authorizes before validation, so empty bodies suffice for 401/403.
 */
import { DataSource } from 'typeorm';
import { ApiKeysService, closure, OperationName, OPERATIONS, Permission } from '@ws/auth';
import { OPERATION_CONTROLLERS } from '../../apps/api/src/app.module';
import { operationHandlersOf } from '../../apps/api/src/public-api/operation-routes';
import { TestApi, TestKey } from './harness';

/**
 * Catalog operations that have no route yet: they must answer 404 Unknown operation. Routing one makes the
 * agreement test fail until it is removed from here, which puts it under the matrix below.
 */
const UNROUTED: readonly OperationName[] = [];

const CATALOG = Object.keys(OPERATIONS) as OperationName[];
const ROUTED = CATALOG.filter((op) => !UNROUTED.includes(op));
const WRITING = ROUTED.filter((op) => OPERATIONS[op].writes);
const READING = ROUTED.filter((op) => !OPERATIONS[op].writes);

/** Everything a key must hold for the operation: its permissions closed over their dependencies. */
const sufficient = (op: OperationName): Permission[] => [...closure(OPERATIONS[op].permissions)].sort();

/** [operation, permission withheld] for every permission of every routed operation's closure. */
const WITHHELD: Array<[OperationName, Permission]> = ROUTED.flatMap((op) => sufficient(op).map((p): [OperationName, Permission] => [op, p]));

const REFUSED = [401, 403];

describe('permission matrix (from the operation catalog)', () => {
  let api: TestApi;
  const keys = new Map<string, TestKey>();

  /**
   * A key holding exactly `permissions`, written in SQL: the grant check would refuse a set that lacks a
   * dependency, and the point here is that the guard refuses it too. One key per distinct set.
   */
  async function keyHolding(permissions: Permission[], options: { readOnly?: boolean } = {}): Promise<TestKey> {
    const id = `${options.readOnly ? 'ro:' : ''}${[...permissions].sort().join('|')}`;
    const known = keys.get(id);
    if (known) return known;
    const key = await api.key([], options);
    await api.app.get(DataSource).query('UPDATE api_keys SET permissions = $2 WHERE api_key = $1', [key.api_key, permissions]);
    keys.set(id, key);
    return key;
  }

  // Every 401 below comes from one address and two keys, on purpose: the failed-auth limits stay out of the way.
  beforeAll(async () => (api = await TestApi.start({ AUTH_FAILURES_PER_ADDRESS: 1_000_000, AUTH_FAILURES_PER_KEY: 1_000_000 })));
  afterAll(async () => api?.close());

  describe('catalog and routes agree', () => {
    /** Operation names declared by @Operation on the controllers this api actually mounts. */
    /** The operations the api routes: the @Operation handlers of the controllers it hands its operation routes. */
    function routedOperations(): string[] {
      return operationHandlersOf(OPERATION_CONTROLLERS).map((handler) => handler.operation);
    }

    it('every @Operation route is in the catalog, once, and every catalog operation is routed or listed as unrouted', () => {
      const routes = routedOperations();
      expect(routes.length).toBeGreaterThan(0);
      expect(new Set(routes).size).toBe(routes.length);
      expect(routes.filter((op) => !(op in OPERATIONS))).toEqual([]);
      expect([...routes].sort()).toEqual([...ROUTED].sort());
    });

    it('every routed operation is served at POST /api/public/<operation>', () => {
      const fastify = api.app.getHttpAdapter().getInstance();
      const missing = ROUTED.filter((op) => !fastify.hasRoute({ method: 'POST', url: `/api/public/${op}` }));
      expect(missing).toEqual([]);
    });

    // it.each refuses an empty table: the check runs while some operation is unrouted.
    (UNROUTED.length ? it.each(UNROUTED.map((op) => [op])) : it.skip.each([['(none)']]))('%s has no route yet: 404 Unknown operation, even for a Global Admin', async (op) => {
      const res = await api.call(op, await keyHolding(['Global Admin']));
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error_message: 'Unknown operation' });
    });
  });

  describe('a key holding exactly the closure of the operation is not refused (positive control)', () => {
    it.each(ROUTED.map((op) => [op]))('%s', async (op) => {
      const res = await api.call(op, await keyHolding(sufficient(op)));
      // An empty body may fail validation (400); it must get past authentication and authorization.
      expect(REFUSED).not.toContain(res.status);
      expect(res.status).toBeLessThan(500);
    });
  });

  describe('withholding any one permission of the closure answers 403 naming it', () => {
    it.each(WITHHELD)('%s without %s', async (op, withheld) => {
      const held = sufficient(op).filter((p) => p !== withheld);
      const res = await api.call(op, await keyHolding(held));
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: `Missing permissions: ${withheld}` });
    });
  });

  describe('Read Only keys', () => {
    it.each(WRITING.map((op) => [op]))('are refused %s (it writes)', async (op) => {
      const res = await api.call(op, await keyHolding(sufficient(op), { readOnly: true }));
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: `The API key is Read Only and ${op} writes` });
    });

    it.each(READING.map((op) => [op]))('pass %s (it only reads)', async (op) => {
      const res = await api.call(op, await keyHolding(sufficient(op), { readOnly: true }));
      expect(REFUSED).not.toContain(res.status);
      expect(res.status).toBeLessThan(500);
    });
  });

  describe('Queues Admin (the queue dashboard\'s permission, test/e2e/queue-dashboard.e2e-spec.ts) grants no operation', () => {
    it.each(ROUTED.filter((op) => sufficient(op).length > 0).map((op) => [op]))('%s is refused to a key holding only Queues Admin', async (op) => {
      const res = await api.call(op, await keyHolding(['Queues Admin']));
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: `Missing permissions: ${sufficient(op).join(', ')}` });
    });
  });

  describe('expired and revoked keys answer 401 on every operation', () => {
    let expired: TestKey;
    let revoked: TestKey;
    beforeAll(async () => {
      expired = await api.key(['Global Admin'], { expiresAt: new Date(Date.now() - 1000) });
      revoked = await api.key(['Global Admin']);
      // Used once first, so the authenticator has it cached when it is revoked.
      expect((await api.call('get_users', revoked)).status).toBe(200);
      await api.app.get(ApiKeysService).revoke(revoked.api_key);
    });

    it.each(ROUTED.map((op) => [op]))('%s', async (op) => {
      const expiredRes = await api.call(op, expired);
      expect(expiredRes.status).toBe(401);
      expect(expiredRes.body).toEqual({ error_message: 'The API key has expired' });
      const revokedRes = await api.call(op, revoked);
      expect(revokedRes.status).toBe(401);
      expect(revokedRes.body).toEqual({ error_message: 'Invalid api_key or api_key_secret' });
    });
  });
});
