import request from 'supertest';
import { DataSource } from 'typeorm';
import { WebSocket } from 'ws';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { RfbSession } from '@ws/stream';
import { IDLE_CLOSE_CODE, StreamGateway } from '../../apps/api/src/gateway/stream-gateway';
import { dockerExec } from './audio-fixtures';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';
import { OpenStream, openStream, registerLocalServer, waitForRunningWorkspace } from './fixtures';

/** One idle_disconnect "minute" in this suite (IDLE_DISCONNECT_MINUTE_MS), so an idle disconnect comes within seconds. */
const MINUTE_MS = 1000;

/**
 * The gateway's enforcement of the workspace's effective client settings, seen by a protocol-level client (the
 * RFB client over the gateway's websocket, as the browser's noVNC) against a real desktop container: the
 * workspace's clipboard is read and set inside the container with xclip; the VNC server (Xvnc) moves it to and from its clients.
 */
describe('stream gateway: client settings enforced in the protocol', () => {
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let admin: TestKey;
  let imageId: string;
  let workspaceId: string;
  let containerId: string;
  let ownerJwt: string;
  let joinerJwt: string;
  let texts = 0;
  const streams: OpenStream[] = [];

  const settings = (clientSettings: Record<string, boolean | number>) => api.app.get(GroupsService).updateSettings('All Users', { clientSettings });
  const unique = (what: string) => `${what}-${process.pid}-${++texts}-${Math.random().toString(36).slice(2, 8)}`;

  async function open(jwt: string, workspace = workspaceId): Promise<OpenStream> {
    const stream = await openStream(base, workspace, jwt);
    streams.push(stream);
    return stream;
  }

  /** The gateway's session of the stream opened last for the owner (viewOnly false) or a joiner. */
  function session(viewOnly: boolean): RfbSession {
    const sessions = api.app.get(StreamGateway).registry.list().filter((s) => s.viewOnly === viewOnly && !s.closed);
    expect(sessions.length).toBeGreaterThan(0);
    return sessions[sessions.length - 1];
  }

  /** Sets the workspace's CLIPBOARD and PRIMARY selections (xclip stays running as their owner). */
  async function setWorkspaceClipboard(text: string, container = containerId): Promise<void> {
    await dockerExec(container, `printf %s '${text}' > /tmp/clip && for s in clipboard primary; do xclip -selection $s -i /tmp/clip >/dev/null 2>&1; done`);
  }

  /** What the workspace holds as its CLIPBOARD selection: Xvnc takes it over with a client's text (and answers for it). */
  async function workspaceCutBuffer(container = containerId): Promise<string> {
    return (await dockerExec(container, 'timeout 5 xclip -o -selection clipboard 2>/dev/null || true')).toString();
  }

  /** Reads whole (non-incremental) updates, so ServerCutText sent meanwhile is read, until `until()` holds. */
  async function pumpUntil(stream: OpenStream, what: string, until: () => boolean, timeoutMs = 45_000): Promise<void> {
    await waitFor(what, async () => {
      await stream.rfb.update({ incremental: false, timeoutMs: 10_000 });
      return until() ? true : undefined;
    }, timeoutMs, 50);
  }

  beforeAll(async () => {
    api = await TestApi.start({ IDLE_DISCONNECT_MINUTE_MS: MINUTE_MS }, { worker: true });
    base = await api.listen();
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 640, yRes: 400 });
    imageId = image.id;
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    const ownerId = (await api.call('create_user', admin, { target_user: { username: 'enforce-owner' } })).body.user.user_id;
    const joinerId = (await api.call('create_user', admin, { target_user: { username: 'enforce-joiner' } })).body.user.user_id;
    const requested = (await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id, enable_sharing: true })).body;
    workspaceId = requested.workspace_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId);
    containerId = running.workspace.container_id;
    ownerJwt = running.workspace_url.split('/').pop();
    const joined = await api.call('join_workspace', key, { share_id: requested.share_id, user_id: joinerId });
    expect(joined.status).toBe(200);
    joinerJwt = joined.body.session_token;
  }, 300_000);

  afterEach(async () => {
    for (const s of streams.splice(0)) await s.rfb.close().catch(() => undefined);
    await settings({ allow_workspace_clipboard_up: true, allow_workspace_clipboard_down: true, idle_disconnect: 0 });
  });
  afterAll(async () => api?.close());

  it('clipboard down: the workspace\'s text reaches the owner as ServerCutText when allowed, never a view-only joiner', async () => {
    const owner = await open(ownerJwt);
    const joiner = await open(joinerJwt);
    const joinerSession = session(true);
    const down = unique('down');
    await setWorkspaceClipboard(down);
    await pumpUntil(owner, 'the owner to receive the workspace clipboard', () => owner.rfb.serverCutTexts.includes(down));
    // x11vnc sent it to the joiner too; the gateway cut it out of the joiner's stream.
    await waitFor('the joiner\'s copy dropped', async () => (joinerSession.stats().clipboardDown.dropped > 0 ? true : undefined), 20_000);
    await pumpUntil(joiner, 'an update after the drop', () => true);
    expect(joiner.rfb.serverCutTexts).toEqual([]);
    expect(joinerSession.stats().clipboardDown.forwarded).toBe(0);
  }, 90_000);

  it('clipboard down: dropped for the owner when allow_workspace_clipboard_down is off', async () => {
    await settings({ allow_workspace_clipboard_down: false });
    const owner = await open(ownerJwt);
    const gateway = session(false);
    const down = unique('down-refused');
    await setWorkspaceClipboard(down);
    await waitFor('the workspace clipboard dropped', async () => (gateway.stats().clipboardDown.dropped > 0 ? true : undefined), 20_000);
    await pumpUntil(owner, 'an update after the drop', () => true);
    expect(owner.rfb.serverCutTexts).toEqual([]);
    expect(gateway.stats().clipboardDown.forwarded).toBe(0);
  }, 90_000);

  it('a cast link\'s enforced settings win over the group\'s (a workspace launched from the link)', async () => {
    const link = await api.call('create_cast_config', admin, {
      target_cast_config: {
        casting_config_name: 'Enforced', image_id: imageId, key: unique('enforced'), allow_anonymous: true, enforce_client_settings: true,
        allow_workspace_clipboard_down: false, allow_workspace_clipboard_up: false,
      },
    });
    expect(link.status).toBe(200);
    const launched = await request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key: link.body.cast_config.key });
    expect(launched.status).toBe(200);
    const cast = { workspaceId: launched.body.workspace_id as string, jwt: launched.body.session_jwt as string };
    // As the browser client waits: the connect route answers the workspace's status (a status call would renew the link).
    await waitFor('the cast workspace running', async () => {
      const res = await request(api.app.getHttpServer()).post('/api/client/connect').send({ session_jwt: cast.jwt, workspace_id: cast.workspaceId });
      return res.body.operational_status === 'running' ? true : undefined;
    }, 120_000, 250);
    const [{ container_id: castContainer }] = await api.app.get(DataSource).query('SELECT container_id FROM workspaces WHERE id = $1', [cast.workspaceId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5')]);
    const owner = await open(cast.jwt, cast.workspaceId);
    const gateway = session(false);
    const down = unique('cast-down');
    await setWorkspaceClipboard(down, castContainer);
    await waitFor('the workspace clipboard dropped', async () => (gateway.stats().clipboardDown.dropped > 0 ? true : undefined), 45_000);
    const up = unique('cast-up');
    owner.rfb.sendClientCutText(up);
    owner.rfb.sendPointerEvent(6, 6);
    await waitFor('the gateway to handle both', async () => (gateway.stats().inputForwarded.pointer === 1 ? true : undefined), 10_000);
    expect(gateway.stats().inputDropped.clipboard).toBe(1);
    await pumpUntil(owner, 'an update after the drop', () => true);
    expect(owner.rfb.serverCutTexts).toEqual([]);
    expect(await workspaceCutBuffer(castContainer)).not.toContain(up);
  }, 180_000);

  // After the clipboard-down tests: x11vnc may hold back its own selection changes for a while after a client set it.
  it('clipboard up: the client\'s text reaches the workspace when allowed, and is dropped when not', async () => {
    const allowed = await open(ownerJwt);
    const up = unique('up');
    allowed.rfb.sendClientCutText(up);
    await waitFor('the text in the workspace', async () => ((await workspaceCutBuffer()) === up ? true : undefined), 20_000, 200);
    expect(session(false).stats().inputForwarded.clipboard).toBe(1);

    // The first connection stays open: Xvnc holds a client's text only while that client is connected.
    await settings({ allow_workspace_clipboard_up: false });
    const refused = await open(ownerJwt);
    const gateway = session(false);
    refused.rfb.sendClientCutText(unique('refused'));
    // A pointer event after it: once it was forwarded, the cut text before it was dealt with.
    refused.rfb.sendPointerEvent(5, 5);
    await waitFor('the gateway to handle both', async () => (gateway.stats().inputForwarded.pointer === 1 ? true : undefined), 10_000);
    expect(gateway.stats().inputDropped.clipboard).toBe(1);
    expect(gateway.stats().inputForwarded.clipboard).toBe(0);
    await pumpUntil(refused, 'an update after the pointer event', () => true);
    expect(await workspaceCutBuffer()).toBe(up);
    await allowed.rfb.close();
  }, 90_000);

  it('idle_disconnect closes the owner\'s stream with the reason after that long without input; a view-only joiner stays', async () => {
    await settings({ idle_disconnect: 2 });
    const owner = await open(ownerJwt);
    const joiner = await open(joinerJwt);
    const joinerSession = session(true);
    const closed = await Promise.race([owner.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), 30_000).unref())]);
    expect(closed).toEqual({ code: IDLE_CLOSE_CODE, reason: 'Disconnected after 2 minutes without input' });
    // The joiner sent no input either, for longer than the owner's limit now: it is not timed.
    await waitFor('the joiner idle past the limit', async () => (joinerSession.idleMs() > 3 * MINUTE_MS ? true : undefined), 30_000);
    expect(joiner.ws.readyState).toBe(WebSocket.OPEN);
    await pumpUntil(joiner, 'the joiner still streaming', () => true);
    expect(joiner.ws.readyState).toBe(WebSocket.OPEN);
  }, 90_000);
});
