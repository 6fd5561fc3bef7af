import * as jpeg from 'jpeg-js';
import { WebSocket } from 'ws';
import { DataSource } from 'typeorm';
import { ImagesService } from '@ws/images';
import { StreamGateway } from '../../apps/api/src/gateway/stream-gateway';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';
import { openStream, registerLocalServer, waitForRunningWorkspace } from './fixtures';

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

describe('stream gateway, screenshots and live statistics', () => {
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let admin: TestKey;
  let userId: string;
  let workspace: { workspace_id: string; share_id: string; workspace_url: string };
  let ownerJwt: string;

  beforeAll(async () => {
    api = await TestApi.start({}, { worker: true });
    base = await api.listen();
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'viewer-test' } })).body.user.user_id;
    const requested = (await api.call('request_workspace', key, { user_id: userId, image_id: image.id, enable_sharing: true })).body;
    const running = await waitForRunningWorkspace(api, key, requested.workspace_id, userId);
    workspace = { workspace_id: requested.workspace_id, share_id: requested.share_id, workspace_url: running.workspace_url };
    ownerJwt = running.workspace_url.split('/').pop();
  });
  afterAll(async () => api?.close());

  it('connect answers who the link is for and sets the stream cookie with the Same Site policy', async () => {
    const res = await api.raw().post('/api/client/connect').send({ session_jwt: ownerJwt, workspace_id: workspace.workspace_id });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      workspace_id: workspace.workspace_id, user_id: userId, username: 'viewer-test', view_only: false, operational_status: 'running',
      operational_progress: 100, operational_message: 'Running', stream_path: `/api/stream/${workspace.workspace_id}/vnc`,
      client_settings: expect.objectContaining({ allow_workspace_clipboard_up: true }), x_res: 800, y_res: 600,
    });
    expect(res.headers['set-cookie'][0]).toBe(`ws_stream=${ownerJwt}; Path=/api/stream; HttpOnly; SameSite=Lax; Max-Age=86400`);
    await api.app.get(DataSource).query(`UPDATE settings SET value = '"None"' WHERE key = 'same_site_cookie_policy'`);
    try {
      const none = await api.raw().post('/api/client/connect').send({ session_jwt: ownerJwt, workspace_id: workspace.workspace_id });
      expect(none.headers['set-cookie'][0]).toMatch(/; SameSite=None; Max-Age=86400; Secure$/);
    } finally {
      await api.app.get(DataSource).query(`UPDATE settings SET value = '"Lax"' WHERE key = 'same_site_cookie_policy'`);
    }
    const wrong = await api.raw().post('/api/client/connect').send({ session_jwt: 'nope', workspace_id: workspace.workspace_id });
    expect(wrong.status).toBe(401);
  });

  it('get_workspace_screenshot answers a JPEG of the requested width with the desktop aspect', async () => {
    for (const [width, height] of [[undefined, 225], [640, 480]] as const) {
      const res = await api.call('get_workspace_screenshot', key, { workspace_id: workspace.workspace_id, user_id: userId, ...(width ? { width } : {}) }).buffer(true).parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('image/jpeg');
      const decoded = jpeg.decode(res.body as Buffer);
      expect([decoded.width, decoded.height]).toEqual([width ?? 300, height]);
      // The reference desktop's background (#2e5d87) fills most of the frame: the image is not blank.
      const colours = new Set<number>();
      for (let i = 0; i < decoded.data.length; i += 4 * 97) colours.add((decoded.data[i] << 16) | (decoded.data[i + 1] << 8) | decoded.data[i + 2]);
      expect(colours.size).toBeGreaterThan(2);
    }
    for (const width of [0, 5000, 'wide']) {
      const res = await api.call('get_workspace_screenshot', key, { workspace_id: workspace.workspace_id, user_id: userId, width });
      expect(res.status).toBe(400);
    }
  });

  it('stats need a connected client; then they measure the stream, per client', async () => {
    const none = await api.call('get_workspace_frame_stats', key, { workspace_id: workspace.workspace_id, user_id: userId });
    expect(none.status).toBe(409);
    expect(none.body.error_message).toMatch(/No client is connected/);

    const { ws, rfb } = await openStream(base, workspace.workspace_id, { cookie: `ws_stream=${ownerJwt}` });
    try {
      await rfb.captureFrame({ timeoutMs: 15_000 });
      expect([rfb.width, rfb.height]).toEqual([800, 600]);
      // Change the desktop and keep asking for updates until the gateway has published a change.
      await api.call('exec_command_workspace', admin, { workspace_id: workspace.workspace_id, user_id: userId, exec_config: { cmd: 'DISPLAY=:1 xterm -geometry 60x20+200+200 -e sleep 60 &' }, wait: true });
      const stats = await waitFor('published frame stats with a change', async () => {
        await rfb.update({ incremental: false, timeoutMs: 5000 });
        const res = await api.call('get_workspace_frame_stats', key, { workspace_id: workspace.workspace_id, user_id: userId, client: 'auto' });
        return res.status === 200 && res.body.frame.changed > 0 && res.body.clients.length === 1 ? res.body : undefined;
      }, 30_000, 200);
      expect(stats).toEqual({
        frame: { resx: 800, resy: 600, changed: expect.any(Number), server_time: expect.any(Number) },
        clients: [{ client: expect.stringMatching(/^[0-9a-f]{8}$/), client_time: expect.any(Number), ping: expect.any(Number), processes: expect.arrayContaining([expect.objectContaining({ process_name: 'raw' })]) }],
        analysis: expect.any(Number), screenshot: 0, encoding_total: expect.any(Number), videoscaling: 0,
        tightjpegencoder: { time: expect.any(Number), count: expect.any(Number), area: expect.any(Number) }, tightwebpencoder: { time: 0, count: 0, area: 0 },
      });
      // The figures move while the desktop changes and the client keeps asking for it.
      await api.call('exec_command_workspace', admin, { workspace_id: workspace.workspace_id, user_id: userId, exec_config: { cmd: "DISPLAY=:1 xsetroot -solid '#aa3300'" }, wait: true });
      await waitFor('the frame stats to change', async () => {
        await rfb.update({ incremental: false, timeoutMs: 5000 });
        const res = await api.call('get_workspace_frame_stats', key, { workspace_id: workspace.workspace_id, user_id: userId });
        return res.body.encoding_total > stats.encoding_total ? res.body : undefined;
      }, 30_000, 200);
      const clientId = stats.clients[0].client;
      expect((await api.call('get_workspace_frame_stats', key, { workspace_id: workspace.workspace_id, user_id: userId, client: 'none' })).body.clients).toEqual([]);
      expect((await api.call('get_workspace_frame_stats', key, { workspace_id: workspace.workspace_id, user_id: userId, client: clientId })).body.clients[0].client).toBe(clientId);
      const unknownClient = await api.call('get_workspace_frame_stats', key, { workspace_id: workspace.workspace_id, user_id: userId, client: 'ffffffff' });
      expect([unknownClient.status, unknownClient.body]).toEqual([400, { error_message: 'Invalid client (ffffffff)' }]);
      const bottleneck = await api.call('get_workspace_bottleneck_stats', key, { workspace_id: workspace.workspace_id, user_id: userId });
      expect(Object.keys(bottleneck.body.workspace_user)).toEqual([clientId]);
      for (const figure of bottleneck.body.workspace_user[clientId]) {
        expect(figure).toBeGreaterThanOrEqual(0);
        expect(figure).toBeLessThanOrEqual(10);
      }
    } finally {
      await rfb.close();
      ws.close();
    }
  });

  it('a view-only joiner sees the desktop but its input never reaches the workspace', async () => {
    const joined = await api.call('join_workspace', key, { share_id: workspace.share_id });
    expect(joined.status).toBe(200);
    expect(joined.body).toEqual({
      current_time: expect.any(String), session_token: expect.any(String), user_id: expect.stringMatching(/^[0-9a-f]{32}$/), username: expect.stringMatching(/^anonymous-/),
      workspace: expect.objectContaining({ workspace_id: workspace.workspace_id, user: { username: joined.body.username } }),
      workspace_url: `/#/connect/join/${workspace.share_id}/${joined.body.user_id}/${joined.body.session_token}`,
    });
    // A view-only link opens nothing but the stream: it is not an owner link.
    expect((await api.raw().post('/api/client/connect').send({ session_jwt: joined.body.session_token, workspace_id: workspace.workspace_id })).status).toBe(401);
    expect((await api.raw().post('/api/client/connect').send({ session_jwt: joined.body.session_token, share_id: workspace.share_id })).body.view_only).toBe(true);

    const { ws, rfb } = await openStream(base, workspace.workspace_id, { cookie: `ws_stream=${joined.body.session_token}` });
    try {
      await rfb.captureFrame({ timeoutMs: 15_000 });
      rfb.sendPointerEvent(100, 100, 1);
      rfb.sendPointerEvent(100, 100, 0);
      rfb.sendKeyEvent(true, 0x61);
      rfb.sendKeyEvent(false, 0x61);
      await rfb.update({ incremental: false, timeoutMs: 5000 });
      const session = api.app.get(StreamGateway).registry.list(workspace.workspace_id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'))[0];
      expect(session.stats().viewOnly).toBe(true);
      expect(session.stats().inputDropped).toEqual(expect.objectContaining({ pointer: 2, key: 2 }));
      expect(session.stats().inputForwarded.total).toBe(0);
    } finally {
      await rfb.close();
      ws.close();
    }
    const other = await api.call('join_workspace', key, { share_id: 'f'.repeat(32) });
    expect(other.status).toBe(400);
    expect(other.body).toEqual({ error_message: `Invalid share_id (${'f'.repeat(32)})` });
  });

  it('refuses a renewed link, a foreign origin and no session; closes open streams on logout_user', async () => {
    const { ws, rfb } = await openStream(base, workspace.workspace_id, { cookie: `ws_stream=${ownerJwt}` });
    await rfb.captureFrame({ timeoutMs: 15_000 });
    expect(await upgradeStatus(base, workspace.workspace_id, {})).toBe(401);
    expect(await upgradeStatus(base, workspace.workspace_id, { cookie: `ws_stream=${ownerJwt}`, origin: 'https://evil.example' })).toBe(403);
    // A status call renews the token: the previous link may not open new streams, but the open one stays.
    const renewed = (await api.call('get_workspace_status', key, { workspace_id: workspace.workspace_id, user_id: userId })).body.workspace_url.split('/').pop();
    expect(await upgradeStatus(base, workspace.workspace_id, { cookie: `ws_stream=${ownerJwt}` })).toBe(401);
    expect(ws.readyState).toBe(WebSocket.OPEN);
    expect(await upgradeStatus(base, workspace.workspace_id, { cookie: `ws_stream=${renewed}` })).toBe(101);
    // logout_user revokes the session: the open stream is closed by the gateway.
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    await api.call('logout_user', key, { target_user: { user_id: userId } });
    await expect(closed).resolves.toBeGreaterThan(0);
    await rfb.close().catch(() => undefined);
    expect(await upgradeStatus(base, workspace.workspace_id, { cookie: `ws_stream=${renewed}` })).toBe(401);
  });
});
