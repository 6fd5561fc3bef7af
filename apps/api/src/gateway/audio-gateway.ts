import type { IncomingMessage } from 'node:http';
import { connect, Socket } from 'node:net';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { WebSocket, WebSocketServer } from 'ws';
import { ApiError, AppConfig, dependencyOutage, ErrorCode, httpStatusFor, RETRY_AFTER_SECONDS } from '@ws/common';
import { AuthRateLimiter } from '@ws/auth';
import { PgNotifications } from '@ws/database/pg-notifications';
import { StreamStanding, withOverride, WorkspaceAccess, WorkspacesService } from '@ws/workspaces';
import { originAllowed } from '../client/browser-request-guard';
import { STREAM_COOKIE } from '../client/client-connect.controller';
import { OggOpusDemuxer } from './audio-ogg';
import { AudioKind, audioRefusal } from './audio-policy';

const CONNECT_TIMEOUT_MS = 10_000;
/** Microphone messages: 20-100 ms of s16le 48 kHz mono is 2-10 KB; anything far larger is not a live microphone. */
const MAX_INPUT_MESSAGE_BYTES = 64 * 1024;
/**
 * Audio is live: what a slow reader cannot take is dropped, not queued. About 4 s of 64 kbit/s Opus towards the
 * browser, about 2.5 s of microphone PCM towards the workspace.
 */
const MAX_BROWSER_BACKLOG_BYTES = 32 * 1024;
const MAX_WORKSPACE_BACKLOG_BYTES = 256 * 1024;
/** What the first (text) message of an audio stream announces; every later message is one Opus packet. */
const AUDIO_FORMAT = { codec: 'opus', sample_rate: 48_000, channels: 2 } as const;

interface AudioConnection extends StreamStanding {
  workspaceId: string;
  kind: AudioKind;
  close(reason: string): void;
}

/**
 * The workspace's sound and microphone routes (`/api/stream/<id>/audio`, `/api/stream/<id>/audio_input`), handed
 * over by the StreamGateway. Admits exactly as the VNC stream does (origin, rate limit, cookie, WorkspaceAccess,
 * closing on revoked tokens and locked users), then applies the workspace's effective allow_workspace_audio /
 * allow_workspace_microphone and view-only (403 on the upgrade). Audio out: the image's audio port serves Ogg
 * Opus; each Opus packet goes to the browser as one binary message. Microphone in: each binary message is raw
 * PCM (s16le, 48 kHz, mono) written to the image's audio_input port.
 */
@Injectable()
export class AudioGateway implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(AudioGateway.name);
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_INPUT_MESSAGE_BYTES });
  private readonly connections = new Set<AudioConnection>();

  constructor(
    private readonly access: WorkspaceAccess,
    private readonly workspaces: WorkspacesService,
    private readonly notifications: PgNotifications,
    private readonly config: AppConfig,
    private readonly limiter: AuthRateLimiter,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.notifications.subscribe('session_token_changed', (id) => void this.recheck((c) => c.sessionTokenId === id));
    await this.notifications.subscribe('user_access_changed', (id) => void this.recheck((c) => c.userId === id || c.ownerId === id));
    this.notifications.onReset(() => void this.recheck(() => true));
  }

  onModuleDestroy(): void {
    for (const c of this.connections) c.close('the server is shutting down');
    this.wss.close();
  }

  async upgrade(request: IncomingMessage, socket: Socket, head: Buffer, workspaceId: string, kind: AudioKind): Promise<void> {
    let tcp: Socket | null = null;
    // Before admission, failures are the database's or Redis's (503) and refusals count against the address;
    // after it, a failure to reach the workspace's port is the desktop's (502).
    let admitted = false;
    let reachingDesktop = false;
    const attempt = { address: this.limiter.proxies.clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for']) };
    try {
      if (!originAllowed(request.headers.origin, request.headers.host, new URL(this.config.PUBLIC_BASE_URL).origin)) {
        throw new ApiError(ErrorCode.Forbidden, 'Streams may only be opened from pages of this service');
      }
      await this.limiter.assertNotBlocked(attempt);
      const jwt = cookie(request.headers.cookie, STREAM_COOKIE);
      if (!jwt) throw new ApiError(ErrorCode.Unauthenticated, 'No session: open the workspace link first');
      const grant = await this.access.authorizeStream(jwt, workspaceId);
      admitted = true;
      const { workspace } = grant;
      if (workspace.status !== 'running' || !workspace.server) throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) is not running`);
      const settings = withOverride((await this.workspaces.settingsFor(workspace.userId as string)).clientSettings, workspace);
      const refusal = audioRefusal(kind, settings, grant.viewOnly);
      if (refusal) throw new ApiError(ErrorCode.Forbidden, refusal);
      const port = workspace.hostPorts[kind];
      if (!port) throw new ApiError(ErrorCode.InvalidState, `This workspace's image has no ${kind} port (port_map.${kind})`);
      reachingDesktop = true;
      tcp = await openTcp(workspace.server.publishHost, port, CONNECT_TIMEOUT_MS);
      const upstream = tcp;
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        const standing = { workspaceId: workspace.id, kind, sessionTokenId: grant.sessionTokenId, userId: grant.userId, ownerId: workspace.userId };
        this.bridge(ws, upstream, standing);
      });
    } catch (caught) {
      tcp?.destroy();
      const err = admitted ? caught : await this.limiter.failed(caught, attempt);
      if (err instanceof ApiError) return reject(socket, httpStatusFor(err.code), err.message, err.retryAfterSeconds);
      const dependency = reachingDesktop ? null : dependencyOutage(err);
      if (dependency) return reject(socket, 503, `${dependency} is unavailable; retry later`);
      this.logger.warn(`${kind} ${workspaceId}: ${(err as Error).message}`);
      return reject(socket, 502, `The workspace's ${kind === 'audio' ? 'sound' : 'microphone input'} did not answer: ${(err as Error).message}`);
    }
  }

  private bridge(ws: WebSocket, tcp: Socket, standing: Omit<AudioConnection, 'close'>): void {
    let closed = false;
    const connection: AudioConnection = {
      ...standing,
      close: (reason) => {
        if (closed) return;
        closed = true;
        this.connections.delete(connection);
        tcp.destroy();
        if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000, reason.slice(0, 120));
      },
    };
    this.connections.add(connection);
    ws.on('close', () => connection.close('the browser closed the stream'));
    ws.on('error', () => connection.close('the browser connection failed'));
    tcp.on('close', () => connection.close(`the workspace's ${standing.kind === 'audio' ? 'sound' : 'microphone input'} ended`));
    tcp.on('error', () => undefined);

    if (standing.kind === 'audio') {
      const demuxer = new OggOpusDemuxer();
      ws.send(JSON.stringify(AUDIO_FORMAT));
      tcp.on('data', (chunk: Buffer) => {
        for (const packet of demuxer.push(chunk)) {
          if (ws.bufferedAmount > MAX_BROWSER_BACKLOG_BYTES) continue;
          ws.send(packet, { binary: true });
        }
      });
      // The browser sends nothing on this route.
      ws.on('message', () => undefined);
    } else {
      tcp.on('data', () => undefined);
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        // Whole s16le samples only: an odd length would shift every later sample by a byte.
        if (!isBinary || data.length % 2 !== 0) return;
        if (tcp.writableLength > MAX_WORKSPACE_BACKLOG_BYTES) return;
        tcp.write(data);
      });
    }
  }

  /** Closes connections whose session token is gone or expired, or whose user or workspace owner is locked or disabled. */
  private async recheck(which: (c: AudioConnection) => boolean): Promise<void> {
    for (const connection of [...this.connections].filter(which)) {
      const reason = await this.access.endReason(connection).catch(() => null);
      if (reason) connection.close(reason);
    }
  }
}

function reject(socket: Socket, status: number, message: string, retryAfterSeconds = status === 503 ? RETRY_AFTER_SECONDS : undefined): void {
  const body = JSON.stringify({ error_message: message });
  const retryAfter = retryAfterSeconds !== undefined ? `Retry-After: ${retryAfterSeconds}\r\n` : '';
  const text = status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : status === 409 ? 'Conflict' : 'Error';
  socket.end(`HTTP/1.1 ${status} ${text}\r\n${retryAfter}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

function cookie(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return null;
}

function openTcp(host: string, port: number, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.setNoDelay(true);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connecting to ${host}:${port} timed out`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
