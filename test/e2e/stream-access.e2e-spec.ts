/**
 * Who may open and keep a stream, seen from a browser's side: cross-site posts to the browser routes are
 * refused, the stream takes its credentials only from the cookie, and locking or disabling a user refuses
 * new streams and closes open ones at once, also on a second api process.
 */
import { WebSocket } from 'ws';
import { ImagesService } from '@ws/images';
import { RfbClient } from '@ws/stream';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';
import { OpenStream, openStream, registerLocalServer, streamCookie, waitForRunningWorkspace } from './fixtures';

const ENTER = 0xff0d;
/** Inside the reference desktop's xterm (geometry +40+40), the only window. */
const XTERM_POINT = [120, 120] as const;

function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  const ws = new WebSocket(url, { headers });
  return new Promise((resolve) => {
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('error', () => resolve(-1));
  });
}

/** Resolves when the stream is closed by the other side; fails after a bound (a lock must close it, not a timeout). */
function closedWithin(stream: OpenStream, timeoutMs: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`the stream was still open after ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([stream.closed.then(({ code }) => code), bound]).finally(() => clearTimeout(timer));
}

/** Types a shell command into the xterm over RFB, as a browser's keyboard would. */
function typeCommand(rfb: RfbClient, command: string): void {
  rfb.sendPointerEvent(XTERM_POINT[0], XTERM_POINT[1], 1);
  rfb.sendPointerEvent(XTERM_POINT[0], XTERM_POINT[1], 0);
  for (const keysym of [...[...command].map((c) => c.charCodeAt(0)), ENTER]) {
    rfb.sendKeyEvent(true, keysym);
    rfb.sendKeyEvent(false, keysym);
  }
}

describe('stream access: cross-site requests, cookie-only streams, locked and disabled users', () => {
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let admin: TestKey;
  let ownerId: string;
  let joinerId: string;
  let workspaceId: string;
  let shareId: string;
  let ownerJwt: string;

  beforeAll(async () => {
    const imageName = desktopImage();
    api = await TestApi.start({}, { worker: true });
    base = await api.listen();
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: imageName, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    ownerId = (await api.call('create_user', admin, { target_user: { username: 'stream-owner' } })).body.user.user_id;
    joinerId = (await api.call('create_user', admin, { target_user: { username: 'stream-joiner' } })).body.user.user_id;
    const requested = (await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id, enable_sharing: true })).body;
    workspaceId = requested.workspace_id;
    shareId = requested.share_id;
    // The last status call renews the owner's token: its link is the one that works, and no later call renews it.
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId);
    ownerJwt = running.workspace_url.split('/').pop();
  }, 300_000);
  afterAll(async () => api?.close());

  const exec = (cmd: string) => api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: ownerId, exec_config: { cmd }, wait: true });
  const fileExists = async (path: string) => (await exec(`test -f ${path} && echo yes || echo no`)).body.stdout === 'yes\n';
  /** Types `touch <path>` until the file exists (bounded): keys sent before the xterm's shell is up are lost. */
  async function typeTouch(rfb: RfbClient, path: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      typeCommand(rfb, `touch ${path}`);
      try {
        await waitFor(`${path} typed into the xterm`, async () => ((await fileExists(path)) ? true : undefined), 15_000, 250);
        return;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  }
  const setUser = async (userId: string, fields: { locked?: boolean; disabled?: boolean }) => {
    const res = await api.call('update_user', admin, { target_user: { user_id: userId, ...fields } });
    expect(res.status).toBe(200);
  };
  const streamUrl = (at: string) => `${at.replace('http', 'ws')}/api/stream/${workspaceId}/vnc`;

  /** What the browser client does first: POST /api/client/connect (JSON, same origin); answers the cookie to send with the websocket. */
  it('refuses cross-site and non-JSON posts to the browser routes; /api/public/* keeps taking curl -d bodies', async () => {
    const body = JSON.stringify({ session_jwt: ownerJwt, workspace_id: workspaceId });
    // What a form on another site can send without asking: text/plain (JSON-shaped), url-encoded, multipart.
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const res = await api.raw().post('/api/client/connect').set('content-type', type).set('origin', 'https://evil.example').send(body);
      expect(res.status).toBe(403);
      expect(res.headers['set-cookie']).toBeUndefined();
      const sameOrigin = await api.raw().post('/api/client/connect').set('content-type', type).set('origin', base).send(body);
      expect(sameOrigin.status).toBe(415);
      expect(sameOrigin.body).toEqual({ error_message: 'Send the body as application/json' });
      expect(sameOrigin.headers['set-cookie']).toBeUndefined();
    }
    const noType = await api.raw().post('/api/client/connect').send(Buffer.from(body));
    expect(noType.status).toBe(415);
    for (const origin of ['https://evil.example', 'null', `http://127.0.0.2:${new URL(base).port}`]) {
      const res = await api.raw().post('/api/client/connect').set('content-type', 'application/json').set('origin', origin).send(body);
      expect(res.status).toBe(403);
      expect(res.body.error_message).toMatch(/Cross-site requests are refused/);
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    // The client's own calls: same origin (or none: not a browser), JSON, with or without a charset.
    for (const headers of [{ origin: base }, {}, { origin: base, 'content-type': 'application/json; charset=UTF-8' }]) {
      const res = await api.raw().post('/api/client/connect').set('content-type', 'application/json').set(headers).send(body);
      expect(res.status).toBe(200);
      expect(res.headers['set-cookie'][0]).toMatch(/^ws_stream=/);
    }
    // Every browser route, not only connect.
    const session = (await api.call('create_session_token', key, { target_user: { user_id: joinerId } })).body.session_token.session_jwt;
    expect((await api.raw().post('/api/client/session').set('content-type', 'text/plain').send(JSON.stringify({ session_jwt: session }))).status).toBe(415);
    expect((await api.raw().post('/api/client/session').set('content-type', 'application/json').set('origin', 'https://evil.example').send({ session_jwt: session })).status).toBe(403);
    expect((await api.raw().post('/api/client/session').set('content-type', 'application/json').set('origin', base).send({ session_jwt: session })).body.user_id).toBe(joinerId);
    expect((await api.raw().post('/api/client/login').set('content-type', 'text/plain').send('{"login_token":"aaaaaaaaaaaaaaaaaaaa"}')).status).toBe(415);
    // The developer API carries no ambient credentials: curl -d (form encoding), any Origin, as the README shows.
    const curl = await api.raw().post('/api/public/get_images').set('content-type', 'application/x-www-form-urlencoded').set('origin', 'https://elsewhere.example').send(JSON.stringify(admin));
    expect(curl.status).toBe(200);
    expect(curl.body.images).toHaveLength(1);
  });

  it('the stream takes its session only from the cookie: ?token= without a cookie is refused', async () => {
    expect(await upgradeStatus(`${streamUrl(base)}?token=${ownerJwt}`, {})).toBe(401);
    const cookie = await streamCookie(api.app, ownerJwt, { workspace_id: workspaceId });
    expect(await upgradeStatus(streamUrl(base), { cookie })).toBe(101);
    expect(await upgradeStatus(streamUrl(base), { cookie, origin: 'https://evil.example' })).toBe(403);
    expect(await upgradeStatus(streamUrl(base), { cookie, origin: base })).toBe(101);
  });

  it('locking the owner closes the open stream at once and refuses new ones, the session check and login links; unlocking restores them', async () => {
    const cookie = await streamCookie(api.app, ownerJwt, { workspace_id: workspaceId });
    const login = (await api.call('get_login', key, { target_user: { user_id: ownerId } })).body.url as string;
    const loginSecret = login.split('/').pop() as string;
    const stream = await openStream(base, workspaceId, { cookie });
    await stream.rfb.captureFrame({ timeoutMs: 15_000 });
    // Positive control: the owner's typing reaches the desktop.
    await typeTouch(stream.rfb, '/tmp/typed-before-lock');

    await setUser(ownerId, { locked: true });
    await closedWithin(stream, 30_000);
    // Whatever the client still sends goes nowhere: the connection is gone.
    try {
      typeCommand(stream.rfb, 'touch /tmp/typed-while-locked');
    } catch {
      // writing to a closed stream may throw; either way nothing is delivered
    }
    await stream.rfb.close().catch(() => undefined);

    const connect = await api.raw().post('/api/client/connect').set('content-type', 'application/json').send({ session_jwt: ownerJwt, workspace_id: workspaceId });
    expect(connect.status).toBe(409);
    expect(connect.body.error_message).toBe(`User (${ownerId}) is locked`);
    expect(connect.headers['set-cookie']).toBeUndefined();
    expect(await upgradeStatus(streamUrl(base), { cookie })).toBe(409);
    expect((await api.raw().post('/api/client/session').set('content-type', 'application/json').send({ session_jwt: ownerJwt })).status).toBe(409);
    const redeem = await api.raw().post('/api/client/login').set('content-type', 'application/json').send({ login_token: loginSecret });
    expect(redeem.status).toBe(409);
    expect(redeem.body.error_message).toMatch(/is locked$/);

    await setUser(ownerId, { locked: false, disabled: true });
    const disabled = await api.raw().post('/api/client/connect').set('content-type', 'application/json').send({ session_jwt: ownerJwt, workspace_id: workspaceId });
    expect(disabled.status).toBe(409);
    expect(disabled.body.error_message).toBe(`User (${ownerId}) is disabled`);
    expect(await upgradeStatus(streamUrl(base), { cookie })).toBe(409);

    // Unlocked and enabled: the same link and the unspent login link work again.
    await setUser(ownerId, { disabled: false });
    expect((await api.raw().post('/api/client/login').set('content-type', 'application/json').send({ login_token: loginSecret })).status).toBe(200);
    const again = await openStream(base, workspaceId, { cookie: await streamCookie(api.app, ownerJwt, { workspace_id: workspaceId }) });
    try {
      await again.rfb.captureFrame({ timeoutMs: 15_000 });
      await typeTouch(again.rfb, '/tmp/typed-after-unlock');
      // Typed into the same xterm before it: had it arrived, it would have run first.
      expect(await fileExists('/tmp/typed-while-locked')).toBe(false);
    } finally {
      await again.rfb.close();
      again.ws.close();
    }
  });

  it('a disabled joiner is refused and its open stream closed; the owner\'s stays; a locked owner\'s workspace is closed to joiners too', async () => {
    const joined = await api.call('join_workspace', key, { share_id: shareId, user_id: joinerId });
    expect(joined.status).toBe(200);
    const joinerJwt = joined.body.session_token as string;
    const owner = await openStream(base, workspaceId, { cookie: await streamCookie(api.app, ownerJwt, { workspace_id: workspaceId }) });
    const joiner = await openStream(base, workspaceId, { cookie: await streamCookie(api.app, joinerJwt, { share_id: shareId }) });
    try {
      await owner.rfb.captureFrame({ timeoutMs: 15_000 });
      await joiner.rfb.captureFrame({ timeoutMs: 15_000 });

      await setUser(joinerId, { disabled: true });
      await closedWithin(joiner, 30_000);
      // The notice was about the joiner only: the owner's stream still answers.
      expect(owner.ws.readyState).toBe(WebSocket.OPEN);
      await owner.rfb.update({ incremental: false, timeoutMs: 15_000 });
      const refused = await api.raw().post('/api/client/connect').set('content-type', 'application/json').send({ session_jwt: joinerJwt, share_id: shareId });
      expect(refused.status).toBe(409);
      expect(refused.body.error_message).toBe(`User (${joinerId}) is disabled`);
      expect(await upgradeStatus(streamUrl(base), { cookie: `ws_stream=${joinerJwt}` })).toBe(409);

      // Decision: a locked owner's workspace is streamed to nobody, joiners included.
      await setUser(joinerId, { disabled: false });
      const rejoined = await openStream(base, workspaceId, { cookie: await streamCookie(api.app, joinerJwt, { share_id: shareId }) });
      await rejoined.rfb.captureFrame({ timeoutMs: 15_000 });
      await setUser(ownerId, { locked: true });
      try {
        await closedWithin(rejoined, 30_000);
        await closedWithin(owner, 30_000);
        const joinerConnect = await api.raw().post('/api/client/connect').set('content-type', 'application/json').send({ session_jwt: joinerJwt, share_id: shareId });
        expect(joinerConnect.status).toBe(409);
        expect(joinerConnect.body.error_message).toBe('The owner of this workspace is locked');
      } finally {
        await setUser(ownerId, { locked: false });
        await rejoined.rfb.close().catch(() => undefined);
      }
    } finally {
      await owner.rfb.close().catch(() => undefined);
      await joiner.rfb.close().catch(() => undefined);
    }
  });

  it('a lock made through one api process closes a stream held by another', async () => {
    const replica = await api.replica();
    try {
      await replica.listen(0, '127.0.0.1');
      const replicaBase = `http://127.0.0.1:${(replica.getHttpServer().address() as { port: number }).port}`;
      const stream = await openStream(replicaBase, workspaceId, { cookie: await streamCookie(replica, ownerJwt, { workspace_id: workspaceId }) });
      await stream.rfb.captureFrame({ timeoutMs: 15_000 });
      await setUser(ownerId, { locked: true });
      try {
        await closedWithin(stream, 30_000);
        expect(await upgradeStatus(streamUrl(replicaBase), { cookie: `ws_stream=${ownerJwt}` })).toBe(409);
      } finally {
        await setUser(ownerId, { locked: false });
        await stream.rfb.close().catch(() => undefined);
      }
      // Unlocked: the replica admits the owner again.
      expect(await upgradeStatus(streamUrl(replicaBase), { cookie: `ws_stream=${ownerJwt}` })).toBe(101);
    } finally {
      await replica.close();
    }
  });
});
