/**
 * Licensing over the API and the CLI: activation keys issued by the operator's own issuer (license keygen, issue),
 * every refusal of `activate` (tampered, expired, untrusted issuer, malformed, over-seated), the permission, the
 * activation reaching a second api process through its notice, and the session-capacity reservation under
 * concurrent transactions. No Docker: workspaces are rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DataSource } from 'typeorm';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import { ApiError, ErrorCode, newId, randomSecret } from '@ws/common';
import { Image } from '@ws/images';
import { Entitlements, LICENSE_FEATURES } from '@ws/licensing';
import { countLiveWorkspaces, Workspace, WorkspaceStatus } from '@ws/workspaces';
import { closeContext } from '../../apps/cli/src/context';
import { runCli as cli } from './cli-runner';
import { HEX32, TestApi, TestKey, TIMESTAMP, waitFor } from './harness';

const FREE_LIMIT = 3;

describe('licensing', () => {
  let api: TestApi;
  let replica: NestFastifyApplication | null = null;
  let admin: TestKey;
  let dir: string;
  let privateKey: string;
  let otherPrivateKey: string;
  let db: DataSource;
  let entitlements: Entitlements;
  let imageId: string;
  const saved = { ...process.env };

  /** An activation key from the test's issuer (or another one), through the CLI as an operator makes it. */
  const issue = async (options: { limit?: number; expires?: string; issuedTo?: string; features?: string[]; key?: string; licenseId?: string } = {}) => {
    const args = ['license', 'issue', '--private-key', options.key ?? privateKey, '--limit', String(options.limit ?? 10), '--expires', options.expires ?? '365d',
      '--type', 'Per Concurrent Session', '--sku', 'WS-E2E'];
    if (options.issuedTo !== undefined) args.push('--issued-to', options.issuedTo);
    if (options.licenseId) args.push('--license-id', options.licenseId);
    for (const f of options.features ?? []) args.push('--feature', f);
    return (await cli(...args)).trim();
  };
  const activate = (body: Record<string, unknown>, key: TestKey = admin) => api.call('activate', key, body);

  /** A live workspace row (no container): what the capacity count sees. */
  const workspaceRow = (status: WorkspaceStatus = 'running', stagingConfigId: string | null = null): QueryDeepPartialEntity<Workspace> => {
    const now = new Date();
    return {
      id: newId(), userId: null, imageId, serverId: null, status, cores: 1, memory: 1024 ** 3, token: randomSecret(), viewOnlyToken: randomSecret(),
      shareId: randomSecret(16), stagingConfigId, startDate: now, keepaliveDate: now, expirationDate: new Date(now.getTime() + 3600_000),
    };
  };

  /** `attempts` concurrent transactions that each reserve one session and record it; answers how many committed. */
  const reserveConcurrently = async (attempts: number) => {
    const results = await Promise.allSettled(
      Array.from({ length: attempts }, () => db.transaction(async (tx) => {
        await entitlements.reserveSessionCapacity(tx, countLiveWorkspaces);
        await tx.getRepository(Workspace).insert(workspaceRow('starting'));
      })),
    );
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
    for (const reason of refused) {
      expect(reason).toBeInstanceOf(ApiError);
      expect((reason as ApiError).code).toBe(ErrorCode.Conflict);
      expect((reason as ApiError).message).toMatch(/^Session limit reached/);
    }
    return results.length - refused.length;
  };
  const liveCount = async () => Number((await db.query(`SELECT count(*) AS n FROM workspaces WHERE status <> 'deleted'`))[0].n);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ws-license-'));
    privateKey = join(dir, 'issuer.pem');
    otherPrivateKey = join(dir, 'other.pem');
    // keygen needs no database: the issuer can run anywhere.
    const issuer = JSON.parse(await cli('license', 'keygen', '--out', privateKey, '--json')) as { public_key: string; issuer_key_id: string };
    expect(issuer.issuer_key_id).toMatch(/^[0-9a-f]{16}$/);
    await cli('license', 'keygen', '--out', otherPrivateKey);
    api = await TestApi.start({ LICENSE_PUBLIC_KEYS: issuer.public_key, UNLICENSED_SESSION_LIMIT: FREE_LIMIT });
    Object.assign(process.env, {
      DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, LOG_LEVEL: 'error',
      LICENSE_PUBLIC_KEYS: issuer.public_key, UNLICENSED_SESSION_LIMIT: String(FREE_LIMIT),
    });
    admin = await api.key(['Licenses Create', 'Licenses View', 'System View']);
    db = api.app.get(DataSource);
    entitlements = api.app.get(Entitlements);
    imageId = (await db.getRepository(Image).save({ id: newId(), name: 'example/desktop:1', friendlyName: 'Desktop' })).id;
  });

  afterAll(async () => {
    await closeContext();
    process.env = saved;
    await replica?.close();
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('without a license the free tier applies: its session limit and features', async () => {
    expect(await entitlements.current()).toBeNull();
    expect(await entitlements.sessionLimit()).toBe(FREE_LIMIT);
    const features = await entitlements.features();
    expect(Object.keys(features).sort()).toEqual([...LICENSE_FEATURES].sort());
    expect(features).toMatchObject({ developer_api: true, session_casting: false, session_staging: false, saml: false });
    await expect(entitlements.assertFeature('session_casting', 'Casting')).rejects.toMatchObject({
      code: ErrorCode.Forbidden, message: 'Casting requires a license with the session_casting feature; no license is applied (free tier)',
    });
    await expect(entitlements.assertFeature('developer_api', 'The API')).resolves.toBeUndefined();
    expect(JSON.parse(await cli('license', 'show', '--json'))).toMatchObject({ license: null, tier: 'free', limit: FREE_LIMIT });
  });

  it('needs Licenses Create (and what it depends on)', async () => {
    const viewer = await api.key(['Licenses View', 'System View']);
    const key = await issue();
    expect((await activate({ activation_key: key }, viewer)).status).toBe(403);
    expect((await api.call('activate', null, { activation_key: key })).status).toBe(401);
    expect(await entitlements.current()).toBeNull();
  });

  it.each([
    ['malformed: not a key at all', () => Promise.resolve('hello'), /^Invalid activation_key: malformed/],
    ['malformed: three parts of garbage', () => Promise.resolve('wsl1.bm9wZQ.AAAA'), /^Invalid activation_key: malformed, its payload is not base64url JSON/],
    ['tampered: limit raised after signing', async () => {
      const [prefix, payload, signature] = (await issue({ limit: 5 })).split('.');
      const content = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
      return `${prefix}.${Buffer.from(JSON.stringify({ ...content, limit: 5000 })).toString('base64url')}.${signature}`;
    }, /signature does not match its content \(the key was altered or damaged\)/],
    ['expired', () => issue({ expires: '2020-01-01T00:00:00Z' }), /^Invalid activation_key: the license [0-9a-f]{32} expired at 2020-01-01T00:00:00.000Z$/],
    ['signed by an untrusted issuer', () => issue({ key: otherPrivateKey }), /which this deployment does not trust \(LICENSE_PUBLIC_KEYS\)$/],
  ])('refuses a %s key with 400 saying so', async (_what, make, message) => {
    const res = await activate({ activation_key: await make() });
    expect(res.status).toBe(400);
    expect(res.body.error_message).toMatch(message);
    expect(await entitlements.current()).toBeNull();
  });

  it('refuses seats above the limit, and seats that are not a positive integer, with 400', async () => {
    const key = await issue({ limit: 4 });
    const over = await activate({ activation_key: key, seats: 5 });
    expect(over.status).toBe(400);
    expect(over.body.error_message).toMatch(/^seats \(5\) is above the limit of license [0-9a-f]{32} \(4\)$/);
    for (const seats of [0, -1, 1.5, '3']) {
      const res = await activate({ activation_key: key, seats });
      expect(res.status).toBe(400);
      expect(res.body.error_message).toMatch(/^seats /);
    }
    expect((await activate({})).body.error_message).toMatch(/^activation_key /);
    expect(await entitlements.current()).toBeNull();
  });

  it('issued_to: the key names it and the request may only repeat it; a key without one takes the request\'s', async () => {
    const named = await issue({ issuedTo: 'Example Corp', limit: 2 });
    const mismatch = await activate({ activation_key: named, issued_to: 'Someone Else' });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error_message).toBe("issued_to (Someone Else) does not match the license's issued_to (Example Corp); omit it to use the license's");
    expect((await activate({ activation_key: named, issued_to: 'example corp' })).body.license.issued_to).toBe('Example Corp');
    const open = await activate({ activation_key: await issue({ issuedTo: '', limit: 2 }), issued_to: 'Branch Office' });
    expect(open.status).toBe(200);
    expect(open.body.license.issued_to).toBe('Branch Office');
  });

  it('a valid key applies at once: the spec\'s License, omitted seats take the limit, re-activation replaces it', async () => {
    const key = await issue({ limit: 7, issuedTo: 'Example Corp', features: ['session_casting', 'session_staging', 'developer_api'] });
    const res = await activate({ activation_key: key });
    expect(res.status).toBe(200);
    const license = res.body.license;
    expect(Object.keys(license).sort()).toEqual(['expiration', 'features', 'is_verified', 'issued_at', 'issued_to', 'license_id', 'license_type', 'limit', 'sku'].sort());
    expect(license).toMatchObject({ issued_to: 'Example Corp', limit: 7, is_verified: true, license_type: 'Per Concurrent Session', sku: 'WS-E2E' });
    expect(license.license_id).toMatch(HEX32);
    expect(license.expiration).toMatch(TIMESTAMP);
    expect(license.issued_at).toMatch(TIMESTAMP);
    expect(new Date(`${license.expiration.replace(' ', 'T')}Z`).getTime()).toBeGreaterThan(Date.now() + 360 * 86_400_000);
    expect(license.features).toEqual(Object.fromEntries(LICENSE_FEATURES.map((f) => [f, ['session_casting', 'session_staging', 'developer_api'].includes(f)])));

    expect(await entitlements.sessionLimit()).toBe(7);
    await expect(entitlements.assertFeature('session_casting', 'Casting')).resolves.toBeUndefined();
    await expect(entitlements.assertFeature('saml', 'SAML login')).rejects.toMatchObject({
      code: ErrorCode.Forbidden, message: `SAML login requires a license with the saml feature; the applied license ${license.license_id} does not include it`,
    });
    // The CLI is another process: it reads the applied license from the database.
    expect(JSON.parse(await cli('license', 'show', '--json'))).toMatchObject({ ...license, entitlement_limit: 7 });

    const fewer = await activate({ activation_key: key, seats: 2 });
    expect(fewer.body.license).toEqual({ ...license, limit: 2 });
    expect(await entitlements.sessionLimit()).toBe(2);
    expect((await db.query('SELECT count(*) AS n FROM licenses WHERE license_id = $1', [license.license_id]))[0].n).toBe('1');
    // A license stops applying at its expiration (judged per use, no timer needed).
    const expiration = new Date(`${license.expiration.replace(' ', 'T')}Z`);
    expect(await entitlements.current(new Date(expiration.getTime() + 1))).toBeNull();
    expect(await entitlements.sessionLimit(new Date(expiration.getTime() + 1))).toBe(FREE_LIMIT);
    // seats null is seats omitted: the maximum again.
    expect((await activate({ activation_key: key, seats: null })).body.license.limit).toBe(7);
  });

  it('an activation reaches a second api process and a worker at once (its notice), and one by the CLI reaches this one', async () => {
    replica = await api.replica();
    await api.startWorker();
    const remote = replica.get(Entitlements);
    const worker = (api.worker as INestApplicationContext).get(Entitlements);
    expect(worker).not.toBe(entitlements);
    expect(await remote.current()).not.toBeNull();
    expect(await worker.current()).not.toBeNull();
    const key = await issue({ limit: 9, licenseId: randomSecret(16) });
    const res = await activate({ activation_key: key, seats: 6 });
    expect(res.status).toBe(200);
    // Well inside the replica's cache lifetime (60 s): only the notice explains seeing it.
    await waitFor('the replica to apply the activation', async () => ((await remote.current())?.entitlement.license_id === res.body.license.license_id ? true : undefined), 10_000, 20);
    expect(await remote.sessionLimit()).toBe(6);
    await waitFor('the worker to apply it', async () => ((await worker.sessionLimit()) === 6 ? true : undefined), 10_000, 20);
    await api.stopWorker();

    const byCli = await issue({ limit: 5, licenseId: randomSecret(16) });
    const shown = JSON.parse(await cli('license', 'activate', byCli, '--json')) as { license_id: string; limit: number };
    expect(shown.limit).toBe(5);
    await waitFor('this api to apply the CLI\'s activation', async () => ((await entitlements.current())?.entitlement.license_id === shown.license_id ? true : undefined), 10_000, 20);
    await waitFor('the replica too', async () => ((await remote.sessionLimit()) === 5 ? true : undefined), 10_000, 20);

    // Removing it: the next newest activation applies again, everywhere.
    expect(await cli('license', 'remove', shown.license_id)).toBe(`removed ${shown.license_id}`);
    await waitFor('the replica to fall back', async () => ((await remote.sessionLimit()) === 6 ? true : undefined), 10_000, 20);
  });

  it('reserveSessionCapacity: of 10 concurrent transactions against a limit of 4, exactly 4 record a workspace', async () => {
    const res = await activate({ activation_key: await issue({ limit: 10, licenseId: randomSecret(16) }), seats: 4 });
    expect(res.body.license.limit).toBe(4);
    expect(await liveCount()).toBe(0);
    expect(await reserveConcurrently(10)).toBe(4);
    expect(await liveCount()).toBe(4);
    // Full: nothing more fits, also not two at once.
    expect(await reserveConcurrently(3)).toBe(0);
    await expect(db.transaction((tx) => entitlements.reserveSessionCapacity(tx, countLiveWorkspaces, 2))).rejects.toMatchObject({
      code: ErrorCode.Conflict, message: `Session limit reached: the license ${res.body.license.license_id} allows 4 concurrent workspaces and 4 are live (staged included); 2 more were asked for`,
    });
  });

  it('reserveSessionCapacity counts staged and failed workspaces, not deleted ones; the free tier has its own limit', async () => {
    await db.query(`UPDATE workspaces SET status = 'deleted'`);
    await db.getRepository(Workspace).insert([workspaceRow('running', newId()), workspaceRow('failed')]);
    expect(await reserveConcurrently(10)).toBe(2);
    expect(await liveCount()).toBe(4);

    // Back to the free tier (FREE_LIMIT = 3): a deployment already over it refuses every new workspace.
    for (const id of (await db.query('SELECT license_id FROM licenses')) as Array<{ license_id: string }>) await cli('license', 'remove', id.license_id);
    await waitFor('the free tier', async () => ((await entitlements.current()) === null ? true : undefined), 10_000, 20);
    expect(await reserveConcurrently(5)).toBe(0);
    await db.query(`UPDATE workspaces SET status = 'deleted'`);
    expect(await reserveConcurrently(10)).toBe(FREE_LIMIT);
  });
});
