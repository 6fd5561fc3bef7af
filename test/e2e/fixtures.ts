import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { createWebSocketStream, WebSocket } from 'ws';
import { newId, randomSecret } from '@ws/common';
import { Image } from '@ws/images';
import { Server, ServersService } from '@ws/servers';
import { RfbClient } from '@ws/stream';
import { Workspace, WorkspaceStatus } from '@ws/workspaces';
import { Zone, ZonesService } from '@ws/zones';
import { TestApi, TestKey, waitFor } from './harness';

/** Rows for tests that need workspaces to exist without running containers (permission rules, listings). */
export async function insertWorkspaceRow(db: DataSource, userId: string, status: WorkspaceStatus = 'running'): Promise<Workspace> {
  const zone = await db.getRepository(Zone).save({ id: newId(), name: `zone-${randomSecret(4)}` });
  const server = await db.getRepository(Server).save({
    id: newId(), hostname: `host-${randomSecret(4)}`, dockerEndpoint: 'unix:///var/run/docker.sock', zoneId: zone.id, cores: 4, memory: 8 * 1024 ** 3,
  });
  const image = await db.getRepository(Image).save({ id: newId(), name: 'example/desktop:1', friendlyName: `Desktop ${randomSecret(4)}` });
  const now = new Date();
  return db.getRepository(Workspace).save({
    id: newId(), userId, imageId: image.id, serverId: server.id, status, cores: 1, memory: 1024 ** 3, token: randomSecret(), viewOnlyToken: randomSecret(),
    shareId: randomSecret(16), hostPorts: { vnc: 35900 }, startDate: now, keepaliveDate: now, expirationDate: new Date(now.getTime() + 3600_000),
  });
}

/** Registers this machine's Docker engine as the one server of the 'default' zone, for suites that launch real workspaces. */
export async function registerLocalServer(api: TestApi): Promise<void> {
  const zone = await api.app.get(ZonesService).ensure('default');
  await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 4, memory: 8 * 1024 ** 3 });
}

/**
 * Polls get_workspace_status until the workspace runs (failing at once if it stopped) and answers that reply's body.
 * That last call renews the owner's token: its workspace_url's JWT is the one that works.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the wire body, read field by field by each suite
export function waitForRunningWorkspace(api: TestApi, key: TestKey, workspaceId: string, userId: string, intervalMs = 100): Promise<any> {
  return waitFor(`workspace ${workspaceId} running`, async () => {
    const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
    if (res.body.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(res.body)}`);
    return res.body.workspace?.operational_status === 'running' ? res.body : undefined;
  }, 120_000, intervalMs);
}

/** Polls get_workspace_status until the workspace is gone (400: its id names no live workspace). */
export function waitForRemovedWorkspace(api: TestApi, key: TestKey, workspaceId: string, userId: string, intervalMs = 200): Promise<true> {
  return waitFor(`workspace ${workspaceId} removed`, async () => ((await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId })).status === 400 ? true : undefined), 60_000, intervalMs);
}

/**
 * The browser client's connect call (POST /api/client/connect) on `app` (an api or a replica): answers the stream
 * cookie it sets, `ws_stream=<jwt>`, which a browser then sends with the stream and file routes.
 */
export async function streamCookie(app: NestFastifyApplication, jwt: string, target: { workspace_id: string } | { share_id: string }): Promise<string> {
  const res = await request(app.getHttpServer()).post('/api/client/connect').set('content-type', 'application/json').send({ session_jwt: jwt, ...target });
  if (res.status !== 200) throw new Error(`client connect answered ${res.status}: ${JSON.stringify(res.body)}`);
  const cookie = (res.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
  if (cookie !== `ws_stream=${jwt}`) throw new Error(`client connect set ${cookie}, not the stream cookie`);
  return cookie;
}

/** A VNC stream opened through the gateway, past the RFB handshake. */
export interface OpenStream {
  ws: WebSocket;
  rfb: RfbClient;
  /** Resolves with the websocket's close code and reason, whichever side closed it. */
  closed: Promise<{ code: number; reason: string }>;
  /** When the upgrade completed (Date.now()). */
  openedAt: number;
}

/**
 * Opens the workspace's VNC stream through the gateway as the browser client does and completes the RFB handshake.
 * `credentials`: a stream JWT (sent as the stream cookie) or the upgrade's own headers.
 */
export async function openStream(base: string, workspaceId: string, credentials: string | Record<string, string>): Promise<OpenStream> {
  const headers = typeof credentials === 'string' ? { cookie: `ws_stream=${credentials}` } : credentials;
  const ws = new WebSocket(`${base.replace('http', 'ws')}/api/stream/${workspaceId}/vnc`, { headers });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  // Attached before 'open', as a browser does: the gateway greets as soon as the upgrade completes.
  const stream = createWebSocketStream(ws);
  const opened = new Promise<number>((resolve, reject) => {
    ws.once('open', () => resolve(Date.now()));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    stream.once('error', reject);
  });
  // After the handshake a failed socket shows as `closed`; an error with no listener would crash the test process.
  stream.on('error', () => undefined);
  const openedAt = await opened;
  return { ws, rfb: await RfbClient.fromStream(stream, { timeoutMs: 15_000 }), closed, openedAt };
}

/** Closes the stream from the client's side and resolves once the websocket is closed. */
export async function closeStream({ ws, rfb }: { ws: WebSocket; rfb: RfbClient }): Promise<void> {
  const closed = new Promise<void>((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve() : ws.once('close', () => resolve())));
  await rfb.close().catch(() => undefined);
  ws.close();
  await closed;
}
