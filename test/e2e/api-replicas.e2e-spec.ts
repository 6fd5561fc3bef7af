import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { DataSource } from 'typeorm';
import { WebSocket } from 'ws';
import { ApiKeysService } from '@ws/auth';
import { randomSecret, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServerInventory } from '@ws/servers';
import { desktopImage, freePort, HEX32, TestApi, TestKey, waitFor } from './harness';
import { closeStream, openStream, registerLocalServer } from './fixtures';
import { ApiReplica, LoadBalancer } from './load-balancer';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the wire body, read field by field
  body: any;
}

/** A POST through the balancer, from a loopback address of the test's choosing, optionally pinned to a replica. */
function post(base: string, path: string, body: unknown, options: { from?: string; replica?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const url = new URL(path, base);
  const payload = JSON.stringify(body);
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...options.headers };
  if (options.replica) headers['x-test-replica'] = options.replica;
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, localAddress: options.from, agent: false, timeout: 60_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : {};
        } catch {
          // HAProxy's own error pages are HTML
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${path} did not answer`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** The status of a websocket upgrade to a stream (101 when it opened). */
function upgradeStatus(base: string, workspaceId: string, headers: Record<string, string>): Promise<number> {
  const ws = new WebSocket(`${base.replace('http', 'ws')}/api/stream/${workspaceId}/vnc`, { headers });
  return new Promise((resolve) => {
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('error', () => resolve(-1));
  });
}

const PER_ADDRESS = 5;
const DRAIN_MS = 4000;

/**
 * Issue 24 point 6: two real api processes behind HAProxy (round-robin, websockets tunnelled, health checks on
 * /api/health) on loopback; an integrator's whole session through the balancer, the deployment-wide rules holding
 * across both replicas, and one replica SIGKILLed under load.
 */
describe('api replicas behind HAProxy', () => {
  let api: TestApi;
  let replicas: ApiReplica[] = [];
  let lb: LoadBalancer;
  let key: TestKey;
  let admin: TestKey;
  let imageId: string;
  let userId: string;
  let workspace: { workspace_id: string; share_id: string; jwt: string };
  /**
   * A replica as the docs run one behind a balancer: on SIGTERM it answers 503 on /api/health and keeps serving for
   * longer than the balancer's checks (every 500 ms, down after 2) take to mark it down.
   */
  const spawnReplica = (name: string, port: number) => ApiReplica.spawn(name, port, api.settings as Record<string, unknown>, { API_SHUTDOWN_DRAIN_MS: String(DRAIN_MS) });
  const call = (operation: string, auth: TestKey, body: Record<string, unknown> = {}, options: { from?: string; replica?: string; headers?: Record<string, string> } = {}) =>
    post(lb.base, `/api/public/${operation}`, { ...auth, ...body }, options);

  beforeAll(async () => {
    const limits = { AUTH_FAILURES_PER_ADDRESS: PER_ADDRESS, AUTH_FAILURES_PER_KEY: 1000, AUTH_BLOCK_SECONDS: 120, AUTH_FAILURE_WINDOW_SECONDS: 600 };
    // The in-process api sets up (keys, servers, images) and runs the worker; the replicas are separate processes.
    api = await TestApi.start({ ...limits, TRUSTED_PROXIES: '127.0.0.1' }, { worker: true });
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    imageId = image.id;
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    const [p1, p2, lbPort] = [await freePort(), await freePort(), await freePort()];
    replicas = [spawnReplica('a1', p1), spawnReplica('a2', p2)];
    await Promise.all(replicas.map((r) => r.ready()));
    lb = await LoadBalancer.start({ port: lbPort, servers: replicas.map((r) => ({ name: r.name, port: r.port })), checkIntervalMs: 500, pinHeader: true });
    await lb.serving(['a1', 'a2']);
  });
  afterAll(async () => {
    // A replica that died on its own (not the one the last test kills) shows why.
    for (const r of replicas) if (!r.alive && r.exitCode !== null) console.error(`replica ${r.name} exited ${r.exitCode}:\n${r.output.slice(-4000)}`);
    await lb?.stop();
    await Promise.all(replicas.map((r) => r.stop()));
    await api?.close();
  });

  it('round-robins requests over both replicas', async () => {
    const served: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await call('get_users', admin);
      expect(res.status).toBe(200);
      served.push(res.headers['x-served-by'] as string);
    }
    expect(new Set(served)).toEqual(new Set(['a1', 'a2']));
    for (let i = 1; i < served.length; i++) expect(served[i]).not.toBe(served[i - 1]);
  });

  it("an integrator's session through the balancer: create user, launch, status, join view-only, a stream", async () => {
    const created = await call('create_user', admin, { target_user: { username: 'replica-owner' } });
    expect(created.status).toBe(200);
    userId = created.body.user.user_id;
    const requested = await call('request_workspace', key, { user_id: userId, image_id: toWireId(imageId), enable_sharing: true });
    expect(requested.status).toBe(200);
    const running = await waitFor('the workspace running', async () => {
      const res = await call('get_workspace_status', key, { workspace_id: requested.body.workspace_id, user_id: userId });
      if (res.body.operational_status === 'stopped') throw new Error(`launch failed: ${JSON.stringify(res.body)}`);
      return res.body.workspace?.operational_status === 'running' ? res.body : undefined;
    }, 120_000, 200);
    workspace = { workspace_id: requested.body.workspace_id, share_id: requested.body.share_id, jwt: running.workspace_url.split('/').pop() };

    // The browser client: connect through the balancer sets the stream cookie; the websocket goes through it too.
    const connect = await post(lb.base, '/api/client/connect', { session_jwt: workspace.jwt, workspace_id: workspace.workspace_id });
    expect([connect.status, connect.body.view_only]).toEqual([200, false]);
    const owner = await openStream(lb.base, workspace.workspace_id, workspace.jwt);
    try {
      await owner.rfb.captureFrame({ timeoutMs: 15_000 });
      expect([owner.rfb.width, owner.rfb.height]).toEqual([800, 600]);
    } finally {
      await closeStream(owner);
    }

    const joined = await call('join_workspace', key, { share_id: workspace.share_id });
    expect(joined.status).toBe(200);
    const joinConnect = await post(lb.base, '/api/client/connect', { session_jwt: joined.body.session_token, share_id: workspace.share_id });
    expect([joinConnect.status, joinConnect.body.view_only]).toEqual([200, true]);
    const viewer = await openStream(lb.base, workspace.workspace_id, joined.body.session_token);
    try {
      await viewer.rfb.captureFrame({ timeoutMs: 15_000 });
    } finally {
      await closeStream(viewer);
    }
  });

  it("locking the owner through one replica closes its stream held by the other and refuses new ones on both", async () => {
    const stream = await openStream(lb.base, workspace.workspace_id, { cookie: `ws_stream=${workspace.jwt}`, 'x-test-replica': 'a1' });
    await stream.rfb.captureFrame({ timeoutMs: 15_000 });
    const locked = await call('update_user', admin, { target_user: { user_id: userId, locked: true } }, { replica: 'a2' });
    expect([locked.status, locked.headers['x-served-by']]).toEqual([200, 'a2']);
    try {
      await waitFor('the stream closed', async () => (stream.ws.readyState === WebSocket.CLOSED ? true : undefined), 30_000, 50);
      for (const replica of ['a1', 'a2']) expect(await upgradeStatus(lb.base, workspace.workspace_id, { cookie: `ws_stream=${workspace.jwt}`, 'x-test-replica': replica })).toBe(409);
    } finally {
      await stream.rfb.close().catch(() => undefined);
      expect((await call('update_user', admin, { target_user: { user_id: userId, locked: false } }, { replica: 'a1' })).status).toBe(200);
    }
    for (const replica of ['a1', 'a2']) expect(await upgradeStatus(lb.base, workspace.workspace_id, { cookie: `ws_stream=${workspace.jwt}`, 'x-test-replica': replica })).toBe(101);
    // Refused and closed upgrades reset through the balancer never take a replica down.
    await lb.serving(['a1', 'a2']);
    expect(replicas.map((r) => r.alive)).toEqual([true, true]);
  });

  it('a stream upgrade reset by its client after the refusal does not take the replica down', async () => {
    const target = replicas[0];
    // Each from an address of its own: a refused session counts as a failed authentication.
    for (let i = 1; i <= 4; i++) {
      const socket = connect({ port: target.port, host: '127.0.0.1', localAddress: `127.0.33.${i}` });
      const answered = await new Promise<string>((resolve, reject) => {
        socket.once('error', reject);
        socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1').split('\r\n')[0]));
        socket.once('connect', () => socket.write(`GET /api/stream/${workspace.workspace_id}/vnc HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${Buffer.from(randomSecret(16)).toString('base64')}\r\nCookie: ws_stream=forged.${randomSecret(8)}.jwt\r\n\r\n`));
      });
      expect(answered).toBe('HTTP/1.1 401 Unauthorized');
      // A TCP reset instead of a close (what a balancer aborting the connection looks like).
      socket.resetAndDestroy();
    }
    await target.ready(30_000);
    expect(target.alive).toBe(true);
  });

  it('failed authentications are counted per client address across both replicas (X-Forwarded-For from the balancer)', async () => {
    const wrong = { ...key, api_key_secret: randomSecret(32) };
    const from = '127.0.31.7';
    for (let i = 0; i < PER_ADDRESS; i++) {
      const res = await call('get_users', wrong, {}, { from, replica: i % 2 ? 'a2' : 'a1' });
      expect(res.status).toBe(401);
    }
    // The next failure is refused by either replica: the count lives in Redis, shared by both.
    for (const replica of ['a1', 'a2']) {
      const refused = await call('get_users', wrong, {}, { from, replica });
      expect([refused.status, refused.headers['x-served-by']]).toEqual([429, replica]);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Each replica now knows the block (successes never ask Redis, see libs/auth): the right secret is refused too.
    for (const replica of ['a1', 'a2']) expect((await call('get_users', admin, {}, { from, replica })).status).toBe(429);
    // Another address is not blocked.
    expect((await call('get_users', admin, {}, { from: '127.0.31.8' })).status).toBe(200);
  });

  it('a revoked API key is refused by both replicas (each evicts it on the change notice; the cache bound is 60 s)', async () => {
    const doomed = await api.key(['Global Admin']);
    for (const replica of ['a1', 'a2']) expect((await call('get_users', doomed, {}, { replica })).status).toBe(200);
    await api.app.get(ApiKeysService).revoke(doomed.api_key);
    for (const replica of ['a1', 'a2']) {
      await waitFor(`replica ${replica} refusing the revoked key`, async () => ((await call('get_users', doomed, {}, { replica })).status === 401 ? true : undefined), 60_000, 100);
    }
  });

  it('the same Idempotency-Key sent to each replica at once makes one user', async () => {
    const body = { target_user: { username: 'replica-idempotent' } };
    const headers = { 'idempotency-key': `replicas-${randomSecret(6)}` };
    const answers = await Promise.all(['a1', 'a2'].map((replica) => call('create_user', admin, body, { replica, headers })));
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers[0].body.user.user_id).toBe(answers[1].body.user.user_id);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === 'true')).toHaveLength(1);
    const rows = await api.app.get(DataSource).query(`SELECT count(*)::int AS n FROM users WHERE username = 'replica-idempotent'`);
    expect(rows[0].n).toBe(1);
  });

  it("a cast link's per-address launch limit is counted across both replicas", async () => {
    // An image no host has, with an inventory taken after it was saved: every launch that passes the address limit
    // is refused by placement (503 no_capacity), so no desktop starts and no answer depends on the inventory's timing.
    const missing = await api.app.get(ImagesService).upsert({ name: 'example/replica-cast:1', friendlyName: 'Cast', cores: 1, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } });
    await api.app.get(ServerInventory).refreshAll();
    const newer = await api.app.get(DataSource).query('SELECT bool_and(s.images_checked_at >= i.updated_at) AS newer FROM servers s, images i WHERE s.enabled AND i.id = $1', [missing.id]);
    expect(newer[0].newer).toBe(true);
    const link = await call('create_cast_config', admin, { target_cast_config: { casting_config_name: 'Replicas', image_id: toWireId(missing.id), key: `replicas-${randomSecret(6)}`, allow_anonymous: true, limit_ips: true, ip_request_limit: 2, ip_request_seconds: 3600 } });
    expect(link.status).toBe(200);
    const answers: Reply[] = [];
    for (let i = 0; i < 4; i++) answers.push(await post(lb.base, '/api/client/cast', { key: link.body.cast_config.key }, { from: '127.0.32.5', replica: i % 2 ? 'a2' : 'a1' }));
    expect(answers.map((a) => [a.status, a.body.reason])).toEqual([[503, 'no_capacity'], [503, 'no_capacity'], [429, 'address_limit'], [429, 'address_limit']]);
    expect(answers.map((a) => a.headers['x-served-by'])).toEqual(['a1', 'a2', 'a1', 'a2']);
    // Another address has its own count: refused by placement again, not by the limit.
    const other = await post(lb.base, '/api/client/cast', { key: link.body.cast_config.key }, { from: '127.0.32.6' });
    expect([other.status, other.body.reason]).toEqual([503, 'no_capacity']);
  });

  it('SIGTERM of one replica under load: out of rotation while it drains, every request answered, then it exits; it comes back', async () => {
    const target = { target_user: { user_id: userId } };
    const reads: Reply[] = [];
    const writes: Reply[] = [];
    let stop = false;
    const reader = async () => {
      for (let i = 0; i < 3000 && !stop; i++) reads.push(await call('get_user', admin, target));
    };
    const writer = async () => {
      for (let i = 0; i < 500 && !stop; i++) writes.push(await call('create_user', admin, { target_user: { username: `replica-drain-${i}-${randomSecret(4)}` } }));
    };
    const load = Promise.all([reader(), reader(), writer()]);
    await waitFor('load running on both replicas', async () => (reads.filter((r) => r.headers['x-served-by'] === 'a2').length > 20 ? true : undefined), 30_000, 20);
    const leaving = replicas[1];
    const stopped = leaving.stop('SIGTERM', 60_000);
    // Asked directly, the leaving replica says it is not ready while it still serves.
    await waitFor('the leaving replica\'s health 503', async () => ((await fetch(`${leaving.base}/api/health`).catch(() => null))?.status === 503 ? true : undefined), 10_000, 50);
    expect((await fetch(`${leaving.base}/api/health/live`)).status).toBe(200);
    await stopped;
    expect(leaving.alive).toBe(false);
    const readsAtExit = reads.length;
    await waitFor('reads answered after the exit', async () => (reads.length > readsAtExit + 100 ? true : undefined), 60_000, 50);
    stop = true;
    await load;
    // Nothing failed: requests stopped reaching it before it stopped taking them, and those it had finished.
    expect(reads.filter((r) => r.status !== 200).map((r) => [r.status, r.headers['x-served-by'], r.body])).toEqual([]);
    expect(writes.filter((r) => r.status !== 200).map((r) => [r.status, r.headers['x-served-by'], r.body])).toEqual([]);
    expect(reads.some((r) => r.headers['x-served-by'] === 'a2')).toBe(true);
    expect(leaving.output).not.toMatch(/shutdown (did not finish|failed)/);

    // The replica back on its port: the balancer takes it in again once its checks pass.
    replicas[1] = spawnReplica('a2', leaving.port);
    await replicas[1].ready();
    await lb.serving(['a1', 'a2']);
  });

  it('SIGKILL of one replica under load loses no read; writes in flight answer 502 or complete; nothing is left behind', async () => {
    const db = api.app.get(DataSource);
    const connections = async () => (await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()`))[0].n as number;
    const before = await connections();
    const target = { target_user: { user_id: userId } };
    const reads: Reply[] = [];
    const writes: Array<{ username: string; reply: Reply | Error }> = [];
    let stop = false;
    const reader = async () => {
      for (let i = 0; i < 2000 && !stop; i++) reads.push(await call('get_user', admin, target));
    };
    const writer = async () => {
      for (let i = 0; i < 500 && !stop; i++) {
        const username = `replica-write-${i}-${randomSecret(4)}`;
        writes.push({ username, reply: await call('create_user', admin, { target_user: { username } }).catch((err: Error) => err) });
      }
    };
    // A stream held by the replica about to die.
    const doomedStream = await openStream(lb.base, workspace.workspace_id, { cookie: `ws_stream=${workspace.jwt}`, 'x-test-replica': 'a2' });
    await doomedStream.rfb.captureFrame({ timeoutMs: 15_000 });
    const load = Promise.all([reader(), reader(), reader(), writer()]);
    await waitFor('load running on both replicas', async () => (reads.filter((r) => r.headers['x-served-by'] === 'a2').length > 20 ? true : undefined), 30_000, 20);
    await replicas[1].stop('SIGKILL');
    const readsAtKill = reads.length;
    await waitFor('reads answered after the kill', async () => (reads.length > readsAtKill + 200 ? true : undefined), 60_000, 50);
    stop = true;
    await load;

    // Every read answered 200: in flight on the killed replica, HAProxy sent it again to the other.
    expect(reads.filter((r) => r.status !== 200).map((r) => [r.status, r.headers['x-served-by']])).toEqual([]);
    expect(reads.slice(readsAtKill + 50).every((r) => r.headers['x-served-by'] === 'a1')).toBe(true);
    // A write either completed (its user exists) or got the balancer's 502 (it may or may not have been stored:
    // the client retries it with an Idempotency-Key to know); nothing else.
    for (const { username, reply } of writes) {
      const status = reply instanceof Error ? -1 : reply.status;
      expect([200, 502]).toContain(status);
      if (status === 200) expect((await db.query('SELECT 1 FROM users WHERE username = $1', [username])).length).toBe(1);
    }
    // The killed process's PostgreSQL connections are gone (its LISTEN among them); the survivor serves a session.
    await waitFor('the killed replica\'s connections closed', async () => ((await connections()) < before ? true : undefined), 60_000, 200);
    const status = await call('get_workspace_status', key, { workspace_id: workspace.workspace_id, user_id: userId });
    expect([status.status, status.headers['x-served-by']]).toEqual([200, 'a1']);
    expect(status.body.workspace.operational_status).toBe('running');
    // The stream on the dead replica ended; the browser reconnects through the balancer to the survivor.
    await doomedStream.closed;
    await doomedStream.rfb.close().catch(() => undefined);
    // (get_workspace_status renewed the owner's session: its workspace_url carries the JWT that works now.)
    workspace.jwt = status.body.workspace_url.split('/').pop();
    const again = await openStream(lb.base, workspace.workspace_id, workspace.jwt);
    try {
      await again.rfb.captureFrame({ timeoutMs: 15_000 });
    } finally {
      await closeStream(again);
    }
  });

  it('destroy through the balancer removes the workspace', async () => {
    expect((await call('destroy_workspace', key, { workspace_id: workspace.workspace_id, user_id: userId })).status).toBe(200);
    await waitFor('the workspace removed', async () => ((await call('get_workspace_status', key, { workspace_id: workspace.workspace_id, user_id: userId })).status === 400 ? true : undefined), 60_000, 200);
    expect(workspace.workspace_id).toMatch(HEX32);
  });
});
