import type { ExecResult } from '@ws/agent';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { parseId, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';

/**
 * Staging pools on a real Docker engine: the worker fills a config's pool, request_workspace takes a staged
 * desktop running in its first answer, concurrent requests never share one, expiry recreates, and lowering
 * or deleting a config removes the surplus.
 */
describe('staging pools on a real Docker engine', () => {
  let api: TestApi;
  let admin: TestKey;
  let key: TestKey;
  let db: DataSource;
  let zoneId: string;
  let imageId: string;
  const userIds: string[] = [];

  beforeAll(async () => {
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    zoneId = toWireId(zone.id);
    // Room for every desktop of this file at once (25 in the concurrency test), whatever the overcommit default.
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 64 * 1024 ** 3 });
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Staged desktop', cores: 0.25, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
    imageId = toWireId(image.id);
    admin = await api.key(['Global Admin']);
    key = await api.key(['Users Auth Session', 'User']);
    for (let i = 0; i < 20; i++) userIds.push((await api.call('create_user', admin, { target_user: { username: `staged-${i}` } })).body.user.user_id);
  });
  afterAll(async () => api?.close());

  const createConfig = async (fields: Record<string, unknown>) => {
    const res = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: imageId, ...fields } });
    expect(res.status).toBe(200);
    return res.body.staging_config.staging_config_id as string;
  };
  const updateConfig = async (id: string, fields: Record<string, unknown>) =>
    expect((await api.call('update_staging_config', admin, { target_staging_config: { staging_config_id: id, ...fields } })).status).toBe(200);
  const deleteConfig = async (id: string) => expect((await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: id } })).status).toBe(200);
  /** Unassigned staged rows of a config by status (live ones only). */
  const pool = async (configId: string) => {
    const rows: Array<{ id: string; status: string }> = await db.query(
      `SELECT id, status FROM workspaces WHERE staging_config_id = $1 AND user_id IS NULL AND status <> 'deleted' ORDER BY start_date`, [parseId(configId)],
    );
    return { running: rows.filter((r) => r.status === 'running').map((r) => r.id), live: rows.filter((r) => r.status === 'starting' || r.status === 'running').map((r) => r.id), all: rows };
  };
  const readyCount = async (configId: string) => (await api.call('get_staging_config', admin, { target_staging_config: { staging_config_id: configId } })).body.staging_config.num_current_sessions as number;
  /** Waits for exactly `n` ready staged workspaces and nothing else live in the pool. */
  const filled = (configId: string, n: number, timeoutMs = 240_000) =>
    waitFor(`pool of ${n}`, async () => {
      const p = await pool(configId);
      if (p.all.some((r) => r.status === 'failed')) throw new Error(`a staged workspace failed: ${JSON.stringify(p.all)}`);
      return p.running.length === n && p.live.length === n && (await readyCount(configId)) === n ? p.running : undefined;
    }, timeoutMs, 250);
  const removed = (workspaceIds: string[]) =>
    waitFor('destroyed workspaces removed', async () => {
      const [{ live }] = await db.query(`SELECT count(*)::int AS live FROM workspaces WHERE id = ANY($1) AND status <> 'deleted'`, [workspaceIds.map((id) => parseId(id))]);
      return live === 0 ? true : undefined;
    }, 180_000, 250);
  const destroyAll = async (ids: Array<{ workspaceId: string; userId: string }>) => {
    for (const { workspaceId, userId } of ids) expect((await api.call('destroy_workspace', key, { workspace_id: workspaceId, user_id: userId })).status).toBe(200);
    await removed(ids.map((i) => i.workspaceId));
  };

  it('fills a pool, serves a request from it running in the first answer, and refills', async () => {
    const configId = await createConfig({ num_sessions: 2, expiration: 1 });
    const staged = await filled(configId, 2);
    // Staged containers run with nobody's name on them.
    for (const id of staged) {
      const [{ container_id: containerId }] = await db.query('SELECT container_id FROM workspaces WHERE id = $1', [id]);
      expect((await localDocker().inspect(containerId)).running).toBe(true);
    }

    const res = await api.call('request_workspace', key, { user_id: userIds[0], image_id: imageId });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'running', user_id: userIds[0], username: 'staged-0' });
    expect(staged).toContain(parseId(res.body.workspace_id));
    expect(res.body.workspace_url).toBe(`/#/connect/workspace/${res.body.workspace_id}/${userIds[0]}/${res.body.session_token}`);
    // It is the user's now, running, with a working link and the user's expiry.
    const status = await api.call('get_workspace_status', key, { workspace_id: res.body.workspace_id, user_id: userIds[0] });
    expect(status.body.workspace).toMatchObject({ workspace_id: res.body.workspace_id, user_id: userIds[0], operational_status: 'running' });
    const connect = await api.raw().post('/api/client/connect').set('content-type', 'application/json').send({ session_jwt: status.body.workspace_url.split('/').pop(), workspace_id: res.body.workspace_id });
    expect(connect.status).toBe(200);

    // The assignment refills the pool through the outbox: the staging subscriber was handed the `assigned` event.
    const deliveries = await waitFor('the assigned event delivered to staging', async () => {
      const rows: Array<{ failed: boolean }> = await db.query(
        `SELECT d.failed FROM workspace_event_deliveries d JOIN workspace_events e ON e.id = d.event_id
          WHERE d.subscriber = 'staging-replenish' AND e.workspace_id = $1 AND e.type = 'assigned'`, [parseId(res.body.workspace_id)],
      );
      return rows.length ? rows : undefined;
    }, 60_000, 250);
    expect(deliveries.every((d) => !d.failed)).toBe(true);
    // Two ready again, the claimed one not among them.
    const refilled = await filled(configId, 2);
    expect(refilled).not.toContain(parseId(res.body.workspace_id));

    // What a started container cannot take gets a fresh workspace.
    const fresh = await api.call('request_workspace', key, { user_id: userIds[1], image_id: imageId, environment: { GREETING: 'hi' } });
    expect(fresh.body.status).toBe('starting');
    expect(refilled).not.toContain(parseId(fresh.body.workspace_id));

    await deleteConfig(configId);
    await destroyAll([{ workspaceId: res.body.workspace_id, userId: userIds[0] }, { workspaceId: fresh.body.workspace_id, userId: userIds[1] }]);
    await waitFor('pool removed', async () => ((await pool(configId)).all.length === 0 ? true : undefined), 180_000, 250);
  }, 900_000);

  it('runs the image go command at assignment, with the request workspace_url as WORKSPACE_URL on a browser image', async () => {
    const browser = await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Staged browser', cores: 0.25, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' },
      isBrowser: true, execConfig: { go: { cmd: 'printf %s "$WORKSPACE_URL" > /tmp/go-url' } },
    });
    const res0 = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: toWireId(browser.id), num_sessions: 1, expiration: 1 } });
    const configId = res0.body.staging_config.staging_config_id as string;
    const [staged] = await filled(configId, 1);
    const [{ container_id: containerId }] = await db.query('SELECT container_id FROM workspaces WHERE id = $1', [staged]);
    // Nobody to hand it to yet: the go command has not run.
    expect(((await localDocker().exec(containerId, { cmd: 'test -e /tmp/go-url && echo ran || echo not yet', wait: true, timeoutMs: 30_000 })) as ExecResult).stdout).toBe('not yet\n');

    const url = 'http://127.0.0.1:9/start?from=staging';
    const res = await api.call('request_workspace', key, { user_id: userIds[2], image_id: toWireId(browser.id), workspace_url: url });
    expect(res.body).toMatchObject({ status: 'running', workspace_id: toWireId(staged) });
    const written = await waitFor('the go command wrote WORKSPACE_URL', async () => {
      const out = await api.call('exec_command_workspace', admin, { workspace_id: res.body.workspace_id, user_id: userIds[2], exec_config: { cmd: 'cat /tmp/go-url 2>/dev/null || true' }, wait: true });
      return out.body.stdout ? out.body.stdout : undefined;
    }, 60_000, 250);
    expect(written).toBe(url);

    await deleteConfig(configId);
    await destroyAll([{ workspaceId: res.body.workspace_id, userId: userIds[2] }]);
    await waitFor('pool removed', async () => ((await pool(configId)).all.length === 0 ? true : undefined), 180_000, 250);
  }, 900_000);

  it('20 concurrent requests on two api processes against a pool of 5: 5 staged, 15 fresh, none shared', async () => {
    const configId = await createConfig({ num_sessions: 5, expiration: 1 });
    const staged = await filled(configId, 5);
    // No worker during the burst: nothing refills or starts, so exactly the five staged ones can be claimed.
    await api.stopWorker();
    // Half of them through a second api process on the same database, as a replica behind a load balancer.
    const replica = await api.replica();
    const viaReplica = (userId: string) =>
      request(replica.getHttpServer()).post('/api/public/request_workspace').set('content-type', 'application/json').send({ ...key, user_id: userId, image_id: imageId });
    const answers = await Promise.all(userIds.map((userId, i) => (i % 2 ? viaReplica(userId) : api.call('request_workspace', key, { user_id: userId, image_id: imageId }))))
      .finally(() => replica.close());
    for (const a of answers) expect(a.status).toBe(200);
    const served = answers.filter((a) => a.body.status === 'running');
    const fresh = answers.filter((a) => a.body.status === 'starting');
    expect(served).toHaveLength(5);
    expect(fresh).toHaveLength(15);
    expect(served.map((a) => parseId(a.body.workspace_id)).sort()).toEqual([...staged].sort());
    expect(new Set(answers.map((a) => a.body.workspace_id)).size).toBe(20);
    const owners: Array<{ id: string; user_id: string }> = await db.query('SELECT id, user_id FROM workspaces WHERE id = ANY($1)', [staged]);
    expect(new Set(owners.map((o) => o.user_id)).size).toBe(5);

    await updateConfig(configId, { num_sessions: 0 });
    for (const a of answers) expect((await api.call('destroy_workspace', key, { workspace_id: a.body.workspace_id, user_id: a.body.user_id })).status).toBe(200);
    await api.startWorker();
    await removed(answers.map((a) => a.body.workspace_id));
    await deleteConfig(configId);
  }, 900_000);

  it('recreates staged workspaces past their expiration', async () => {
    const configId = await createConfig({ num_sessions: 1, expiration: 0.004 }); // 14.4 seconds
    const [first] = await filled(configId, 1);
    const [second] = await waitFor('an expired staged workspace replaced', async () => {
      const p = await pool(configId);
      return p.running.length === 1 && p.running[0] !== first ? p.running : undefined;
    }, 240_000, 250);
    expect(second).not.toBe(first);
    const [{ status, destroy_reason }] = await db.query('SELECT status, destroy_reason FROM workspaces WHERE id = $1', [first]);
    expect(['stopping', 'deleted']).toContain(status);
    expect(destroy_reason).toBe('expired');
    await deleteConfig(configId);
    await waitFor('pool removed', async () => ((await pool(configId)).all.length === 0 ? true : undefined), 180_000, 250);
  }, 900_000);

  it('lowering a config removes the surplus, deleting it removes the pool', async () => {
    const configId = await createConfig({ num_sessions: 3, expiration: 1 });
    const three = await filled(configId, 3);
    await updateConfig(configId, { num_sessions: 1 });
    const [kept] = await filled(configId, 1);
    expect(three).toContain(kept);
    await deleteConfig(configId);
    await waitFor('pool removed', async () => ((await pool(configId)).all.length === 0 ? true : undefined), 180_000, 250);
    const containers = (await api.containers()).map((c) => c.labels['workspace-server.workspace-id']);
    for (const id of three) expect(containers).not.toContain(id);
  }, 900_000);
});
