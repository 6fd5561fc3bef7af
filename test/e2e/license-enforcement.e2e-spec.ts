/**
 * The applied license (or the free tier) at work: the session limit of request_workspace (also under 10
 * concurrent requests, cast launches and staged workspaces counted), the features that gate staging, casting,
 * sharing and group usage limits, and an expired license falling back to the free tier. No worker and no
 * Docker: a launch is decided and recorded by the api, and its row (`starting`) holds the seat.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { randomSecret, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { Entitlements } from '@ws/licensing';
import { ServersService } from '@ws/servers';
import { StagingReconciler } from '@ws/staging';
import { ZonesService } from '@ws/zones';
import { closeContext, service } from '../../apps/cli/src/context';
import { runCli as cli } from './cli-runner';
import { HEX32, TestApi, TestKey, waitFor } from './harness';

const FREE_LIMIT = 3;

describe('license enforcement', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;
  let entitlements: Entitlements;
  let dir: string;
  let privateKey: string;
  let zoneId: string;
  let imageId: string;
  let stagedImageId: string;
  let userId: string;
  const saved = { ...process.env };

  /** An activation key from the test's issuer, as an operator makes it (license issue). */
  const issue = async (options: { limit: number; features?: string[]; expires?: string }) => {
    const args = ['license', 'issue', '--private-key', privateKey, '--limit', String(options.limit), '--expires', options.expires ?? '365d',
      '--type', 'Per Concurrent Session', '--sku', 'WS-E2E', '--license-id', randomSecret(16)];
    for (const f of options.features ?? []) args.push('--feature', f);
    return (await cli(...args)).trim();
  };
  /** This api's and the in-process CLI's view of the license (the CLI hears of changes through the notice). */
  const appliedEverywhere = async (licenseId: string | null) => {
    const cliEntitlements = await service(Entitlements);
    for (const [who, seen] of [['api', entitlements], ['cli', cliEntitlements]] as const) {
      await waitFor(`${who} to apply ${licenseId ?? 'the free tier'}`, async () => (((await seen.current())?.entitlement.license_id ?? null) === licenseId ? true : undefined), 10_000, 20);
    }
  };
  const apply = async (options: { limit: number; features?: string[]; expires?: string }): Promise<string> => {
    const res = await api.call('activate', admin, { activation_key: await issue(options) });
    expect(res.status).toBe(200);
    const licenseId = res.body.license.license_id as string;
    await appliedEverywhere(licenseId);
    return licenseId;
  };
  /** Back to no license at all (every activation forgotten): the free tier. */
  const unlicense = async () => {
    await db.query('DELETE FROM licenses');
    await appliedEverywhere(null);
  };
  /** Every workspace gone (history): the next test starts from no live workspace. */
  const clearWorkspaces = () => db.query(`UPDATE workspaces SET status = 'deleted' WHERE status <> 'deleted'`);
  const live = async () => Number((await db.query(`SELECT count(*) AS n FROM workspaces WHERE status <> 'deleted'`))[0].n);
  const requestWorkspace = (body: Record<string, unknown> = {}) => api.call('request_workspace', admin, { user_id: userId, image_id: imageId, ...body });
  const castLaunch = (key: string) => request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key });
  const limitMessage = (source: string, limit: number, liveCount: number) =>
    `Session limit reached: the ${source} allows ${limit} concurrent workspaces and ${liveCount} are live (staged included)`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ws-license-enforcement-'));
    privateKey = join(dir, 'issuer.pem');
    const issuer = JSON.parse(await cli('license', 'keygen', '--out', privateKey, '--json')) as { public_key: string };
    // Licensing settings of its own: the harness then leaves the product's free tier as it is (features included).
    api = await TestApi.start({ LICENSE_PUBLIC_KEYS: issuer.public_key, UNLICENSED_SESSION_LIMIT: FREE_LIMIT });
    Object.assign(process.env, {
      DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, LOG_LEVEL: 'error',
      LICENSE_PUBLIC_KEYS: issuer.public_key, UNLICENSED_SESSION_LIMIT: String(FREE_LIMIT),
    });
    db = api.app.get(DataSource);
    entitlements = api.app.get(Entitlements);
    const zone = await api.app.get(ZonesService).ensure('default');
    zoneId = toWireId(zone.id);
    await api.app.get(ServersService).upsert({ hostname: 'license-host', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 256, memory: 1024 * 1024 ** 3 });
    const images = api.app.get(ImagesService);
    imageId = toWireId((await images.upsert({ name: 'example/desktop:1', friendlyName: 'Licensed desktop', cores: 1, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    stagedImageId = toWireId((await images.upsert({ name: 'example/desktop:1', friendlyName: 'Staged desktop', cores: 1, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'licensed-user' } })).body.user.user_id;
  });

  afterAll(async () => {
    await closeContext();
    process.env = saved;
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    await clearWorkspaces();
    await unlicense();
  });

  it('free tier: UNLICENSED_SESSION_LIMIT workspaces, then a clear 409; a removed one frees its seat', async () => {
    const ids: string[] = [];
    for (let i = 0; i < FREE_LIMIT; i++) {
      const res = await requestWorkspace();
      expect(res.status).toBe(200);
      ids.push(res.body.workspace_id);
    }
    const refused = await requestWorkspace();
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error_message: limitMessage('free tier (no license applied)', FREE_LIMIT, FREE_LIMIT) });
    // A refused launch leaves nothing behind: no row, no anonymous user.
    const users = Number((await db.query('SELECT count(*) AS n FROM users'))[0].n);
    expect((await api.call('request_workspace', admin, { image_id: imageId })).status).toBe(409);
    expect(Number((await db.query('SELECT count(*) AS n FROM users'))[0].n)).toBe(users);
    expect(await live()).toBe(FREE_LIMIT);

    await db.query(`UPDATE workspaces SET status = 'deleted' WHERE id = $1`, [ids[0]]);
    expect((await requestWorkspace()).status).toBe(200);
  });

  it('free tier: staging, casting and group usage limits are refused with 403 naming the feature; the API itself and sharing are not', async () => {
    const staging = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: stagedImageId, num_sessions: 1, expiration: 1 } });
    expect(staging.status).toBe(403);
    expect(staging.body).toEqual({ error_message: 'Session staging requires a license with the session_staging feature; no license is applied (free tier)' });
    const cast = await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: 'Kiosk', image_id: imageId } });
    expect(cast.status).toBe(403);
    expect(cast.body).toEqual({ error_message: 'Session casting requires a license with the session_casting feature; no license is applied (free tier)' });
    await expect(cli('group', 'set', 'All Users', '--usage-limit', '3600')).rejects.toThrow(
      'A group usage_limit requires a license with the usage_limit feature; no license is applied (free tier)',
    );
    // Clearing a limit, and every other group setting, stays allowed.
    expect(await cli('group', 'set', 'All Users', '--usage-limit', 'none', '--keepalive-expiration', '900')).toContain('usage_limit=null');
    // developer_api and session_sharing are in the free tier (UNLICENSED_FEATURES' default).
    const shared = await requestWorkspace({ enable_sharing: true });
    expect(shared.status).toBe(200);
    expect((await api.call('get_staging_configs', admin)).status).toBe(200);
  });

  it('a license with limit N: of 10 concurrent request_workspace exactly N succeed, the rest get the 409', async () => {
    const licenseId = await apply({ limit: 4 });
    const answers = await Promise.all(Array.from({ length: 10 }, () => requestWorkspace()));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(4);
    for (const a of ok) expect(a.body.workspace_id).toMatch(HEX32);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused).toHaveLength(6);
    for (const a of refused) expect(a.body).toEqual({ error_message: limitMessage(`license ${licenseId}`, 4, 4) });
    expect(await live()).toBe(4);
  });

  it('staged workspaces hold seats: the reconciler reserves each, stops short at the limit without failing, and launches are refused', async () => {
    const licenseId = await apply({ limit: 5, features: ['session_staging'] });
    const created = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: stagedImageId, num_sessions: 3, expiration: 1 } });
    expect(created.status).toBe(200);
    const configId = created.body.staging_config.staging_config_id as string;
    const reconciler = api.app.get(StagingReconciler);
    expect(await reconciler.reconcile(configId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'))).toEqual({ created: 3, destroyed: 0 });
    expect(await live()).toBe(3);

    expect((await requestWorkspace()).status).toBe(200);
    expect((await requestWorkspace()).status).toBe(200);
    const refused = await requestWorkspace();
    expect(refused.status).toBe(409);
    expect(refused.body.error_message).toBe(limitMessage(`license ${licenseId}`, 5, 5));
    // Claiming a staged workspace takes no new seat (it holds one since it was staged): served at the limit.
    await db.query(`UPDATE workspaces SET status = 'running' WHERE staging_config_id IS NOT NULL AND status = 'starting'`);
    const claimed = await requestWorkspace({ image_id: stagedImageId });
    expect(claimed.status).toBe(200);
    expect(claimed.body.status).toBe('running');
    expect(await live()).toBe(5);

    // A bigger pool than seats: the reconciler records what fits (nothing now) and is not a failed job.
    expect((await api.call('update_staging_config', admin, { target_staging_config: { staging_config_id: configId, num_sessions: 6 } })).status).toBe(200);
    await expect(reconciler.reconcile()).resolves.toEqual({ created: 0, destroyed: 0 });
    expect(await live()).toBe(5);
    // Seats free up: the next run fills the pool as far as they go (two in the pool, two seats: four more wanted).
    await db.query(`UPDATE workspaces SET status = 'deleted' WHERE staging_config_id IS NULL OR user_id IS NOT NULL`);
    expect(await live()).toBe(2);
    await expect(reconciler.reconcile()).resolves.toEqual({ created: 3, destroyed: 0 });
    expect(await live()).toBe(5);
  });

  it('a license without the features: staging, casting, sharing and usage limits refused; an existing pool drains, not refilled', async () => {
    await apply({ limit: 50, features: ['session_staging', 'session_casting', 'session_sharing', 'usage_limit'] });
    const config = (await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: stagedImageId, num_sessions: 2, expiration: 1 } })).body.staging_config;
    const dashed = (config.staging_config_id as string).replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
    expect(await api.app.get(StagingReconciler).reconcile(dashed)).toEqual({ created: 2, destroyed: 0 });
    await db.query(`UPDATE workspaces SET status = 'running' WHERE staging_config_id = $1 AND status = 'starting'`, [dashed]);
    const unassignedStaged = async () => Number((await db.query(`SELECT count(*) AS n FROM workspaces WHERE staging_config_id IS NOT NULL AND user_id IS NULL AND status <> 'deleted'`))[0].n);
    const cast = await api.call('create_cast_config', admin, {
      target_cast_config: { casting_config_name: 'Kiosk', image_id: imageId, key: `kiosk-${randomSecret(4)}`, allow_anonymous: true, error_url: 'https://example.test/sorry' },
    });
    expect(cast.status).toBe(200);
    expect(await cli('group', 'set', 'All Users', '--usage-limit', '3600')).toContain('usage_limit=3600');
    expect((await castLaunch(cast.body.cast_config.key)).status).toBe(200);

    const bare = await apply({ limit: 50, features: ['developer_api'] });
    const standing = `the applied license ${bare} does not include it`;
    const stagingRefused = await api.call('update_staging_config', admin, { target_staging_config: { staging_config_id: config.staging_config_id, num_sessions: 3 } });
    expect(stagingRefused.status).toBe(403);
    expect(stagingRefused.body.error_message).toBe(`Session staging requires a license with the session_staging feature; ${standing}`);
    expect((await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: stagedImageId, num_sessions: 1, expiration: 1 } })).status).toBe(403);
    // What is staged is still handed out (its seat is taken already), but the pool is not refilled: the
    // reconciler stages nothing (and does not fail).
    const claimed = await requestWorkspace({ image_id: stagedImageId });
    expect(claimed.status).toBe(200);
    expect(claimed.body.status).toBe('running');
    expect(await unassignedStaged()).toBe(1);
    await expect(api.app.get(StagingReconciler).reconcile()).resolves.toEqual({ created: 0, destroyed: 0 });
    expect(await unassignedStaged()).toBe(1);
    // Reading and deleting a config stays allowed.
    expect((await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: config.staging_config_id } })).status).toBe(200);

    const castRefused = await api.call('update_cast_config', admin, { target_cast_config: { cast_config_id: cast.body.cast_config.cast_config_id, casting_config_name: 'Renamed' } });
    expect(castRefused.status).toBe(403);
    expect(castRefused.body.error_message).toBe(`Session casting requires a license with the session_casting feature; ${standing}`);
    // The link's launch too, with its error_url so the browser client can send the visitor on.
    const launch = await castLaunch(cast.body.cast_config.key);
    expect(launch.status).toBe(403);
    expect(launch.body).toEqual({
      error_message: `Session casting requires a license with the session_casting feature; ${standing}`, error_url: 'https://example.test/sorry', reason: 'not_licensed',
    });

    const sharing = await requestWorkspace({ enable_sharing: true });
    expect(sharing.status).toBe(403);
    expect(sharing.body.error_message).toBe(`Workspace sharing requires a license with the session_sharing feature; ${standing}`);
    expect((await requestWorkspace({ enable_sharing: false })).status).toBe(200);

    await expect(cli('group', 'set', 'All Users', '--usage-limit', '7200')).rejects.toThrow(`A group usage_limit requires a license with the usage_limit feature; ${standing}`);
    expect(await cli('group', 'set', 'All Users', '--usage-limit', 'none')).toContain('usage_limit=null');
  });

  it('cast launches take seats through the same pipeline: at the limit the visitor gets the 409 with the link\'s error_url', async () => {
    const licenseId = await apply({ limit: 2, features: ['session_casting'] });
    const cast = (await api.call('create_cast_config', admin, {
      target_cast_config: { casting_config_name: 'Seats', image_id: imageId, key: `seats-${randomSecret(4)}`, allow_anonymous: true, error_url: 'https://example.test/full' },
    })).body.cast_config;
    expect((await castLaunch(cast.key)).status).toBe(200);
    expect((await requestWorkspace()).status).toBe(200);
    const full = await castLaunch(cast.key);
    expect(full.status).toBe(409);
    expect(full.body).toEqual({ error_message: limitMessage(`license ${licenseId}`, 2, 2), error_url: 'https://example.test/full', reason: 'session_limit_reached' });
  });

  it('an expired license falls back to the free tier: its limit and its features', async () => {
    // Expires a few seconds from now: activated while valid, then judged on every use (no timer, no notice).
    const expiration = new Date(Date.now() + 4_000);
    const licenseId = await apply({ limit: 20, features: ['session_staging'], expires: expiration.toISOString() });
    for (let i = 0; i < FREE_LIMIT + 1; i++) expect((await requestWorkspace()).status).toBe(200);
    expect(await entitlements.sessionLimit()).toBe(20);

    await waitFor(`license ${licenseId} to expire`, async () => ((await entitlements.current()) === null ? true : undefined), 30_000, 100);
    const refused = await requestWorkspace();
    expect(refused.status).toBe(409);
    expect(refused.body.error_message).toBe(limitMessage('free tier (no license applied)', FREE_LIMIT, FREE_LIMIT + 1));
    const staging = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: stagedImageId, num_sessions: 1, expiration: 1 } });
    expect(staging.status).toBe(403);
    expect(staging.body.error_message).toBe('Session staging requires a license with the session_staging feature; no license is applied (free tier)');
  });
});
