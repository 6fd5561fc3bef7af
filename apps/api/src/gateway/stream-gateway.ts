import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { WebSocketServer } from 'ws';
import { ApiError, AppConfig, ErrorCode } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { RedisConnections } from '@ws/queue';
import { RecordingCapture } from '@ws/recordings';
import { greetBrowser, RfbSession, RfbSessionRegistry } from '@ws/stream';
import { WorkspaceServerSessions } from '@ws/server-sessions';
import { STREAM_STATS_TTL_SECONDS, streamStatsKey, StreamSnapshot, StreamStanding } from '@ws/workspaces';
import { AudioGateway } from './audio-gateway';
import { AUDIO_STREAM_PATH, AudioKind } from './audio-policy';
import { refuseUpgrade, StreamAdmission, writeRefusal } from './stream-admission';
import { DESKTOP_HANDSHAKE_TIMEOUT_MS, DesktopConnections } from './desktop-connections';

const STREAM_PATH = /^\/api\/stream\/([0-9a-fA-F-]{32,36})\/vnc$/;
const HANDSHAKE_TIMEOUT_MS = DESKTOP_HANDSHAKE_TIMEOUT_MS;
const STATS_INTERVAL_MS = 1000;
/** Websocket close code (application range) of an idle disconnect: the browser client tells it apart by it. */
export const IDLE_CLOSE_CODE = 4001;

interface Connection extends StreamStanding {
  session: RfbSession;
  workspaceId: string;
  /** The owner's idle_disconnect in ms (0: never); view-only joiners are not timed. */
  idleLimitMs: number;
  idleReason: string;
  /** Bytes already added to the stream_bytes_total counter. */
  counted: { toClient: number; fromClient: number };
}

/**
 * Bridges a browser's websocket to its workspace's VNC server. Admits only a live session token of the
 * owner (or a view-only token from join_workspace); authenticates to the VNC server itself, so the browser
 * never sees the VNC password; enforces view-only in the protocol; closes connections whose session token
 * is revoked or whose user (or workspace owner) is locked or disabled; and publishes each connection's
 * measurements to Redis for the stats operations. The workspace's effective client settings, read at admission
 * (a change applies from the next connection), are enforced in the protocol too: clipboard up and down (a
 * view-only joiner never gets the workspace's clipboard), and idle_disconnect closes the owner's stream.
 */
@Injectable()
export class StreamGateway implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(StreamGateway.name);
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 });
  readonly registry = new RfbSessionRegistry();
  private readonly connections = new Set<Connection>();
  private statsTimer: NodeJS.Timeout | null = null;
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly admission: StreamAdmission,
    private readonly redis: RedisConnections,
    private readonly config: AppConfig,
    private readonly recordings: RecordingCapture,
    private readonly audio: AudioGateway,
    private readonly serverSessions: WorkspaceServerSessions,
    private readonly metrics: Metrics,
    private readonly desktops: DesktopConnections,
  ) {}

  onApplicationBootstrap(): void {
    const server = this.adapterHost.httpAdapter.getHttpServer() as HttpServer;
    server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
      // Node hands over an upgrading socket with no 'error' listener: a client or load balancer resetting it
      // (during admission, or after a refusal was written) would otherwise crash the whole api process.
      socket.on('error', () => socket.destroy());
      void this.upgrade(request, socket, head);
    });
    this.statsTimer = setInterval(() => void this.publishStats(), STATS_INTERVAL_MS);
    this.statsTimer.unref();
    this.idleTimer = setInterval(() => this.closeIdle(), Math.min(5000, Math.max(50, this.config.IDLE_DISCONNECT_MINUTE_MS / 10)));
    this.idleTimer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    if (this.statsTimer) clearInterval(this.statsTimer);
    if (this.idleTimer) clearInterval(this.idleTimer);
    for (const c of this.connections) c.session.close('the server is shutting down', 'proxy');
    this.wss.close();
  }

  private async upgrade(request: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://gateway');
    const audio = AUDIO_STREAM_PATH.exec(url.pathname);
    if (audio) return this.audio.upgrade(request, socket, head, audio[1], audio[2] as AudioKind);
    const match = STREAM_PATH.exec(url.pathname);
    if (!match) return writeRefusal(socket, 404, 'Unknown stream');
    let vnc: Socket | null = null;
    // Failures before admission are the database's or Redis's (503); after it, the desktop's (502).
    let admitted = false;
    try {
      const grant = await this.admission.admit(request, match[1]);
      admitted = true;
      const { workspace, settings } = grant;
      const endpoint = workspace.status === 'running' ? this.serverSessions.vncEndpointOf(workspace) : null;
      if (!endpoint) {
        throw new ApiError(ErrorCode.InvalidState, workspace.status === 'running' ? `Workspace (${match[1]}) is reached with a native RDP client (get_rdp_client_connection_info); it has no web stream` : `Workspace (${match[1]}) is not running`);
      }
      // The owner's connections are recorded when their record_sessions is on (asked while the VNC handshake runs).
      const recorded = grant.viewOnly ? Promise.resolve(false) : this.recordings.shouldRecord(workspace.userId);
      vnc = await this.desktops.open(workspace.id, endpoint);
      const record = await recorded;
      const server = vnc;
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        greetBrowser(ws, HANDSHAKE_TIMEOUT_MS)
          .then(() => {
            const clientId = randomBytes(4).toString('hex');
            const recorder = record ? this.recordings.begin({ workspaceId: workspace.id, userId: workspace.userId, clientId }) : null;
            const session = new RfbSession(ws, server, {
              preAuthenticated: true, viewOnly: grant.viewOnly, workspaceId: workspace.id, userId: grant.userId, clientId,
              clipboardUp: settings.allow_workspace_clipboard_up === true,
              // The owner's clipboard is the owner's: a view-only joiner never receives it.
              clipboardDown: settings.allow_workspace_clipboard_down === true && !grant.viewOnly,
              onChunkSent: (chunk) => this.desktops.readBuffers.release(chunk), recorder: recorder ?? undefined,
            });
            if (recorder) session.onClose(() => void recorder.end());
            const idleMinutes = grant.viewOnly ? 0 : Math.max(0, Math.floor(settings.idle_disconnect));
            const connection: Connection = {
              session, workspaceId: workspace.id, sessionTokenId: grant.sessionTokenId, userId: grant.userId, ownerId: workspace.userId,
              idleLimitMs: idleMinutes * this.config.IDLE_DISCONNECT_MINUTE_MS,
              idleReason: `Disconnected after ${idleMinutes} minute${idleMinutes === 1 ? '' : 's'} without input`,
              counted: { toClient: 0, fromClient: 0 },
            };
            this.connections.add(connection);
            this.metrics.streamConnections.inc();
            this.registry.add(workspace.id, session);
            const unwatch = this.admission.watch(connection, (reason) => session.close(reason, 'proxy'));
            session.onClose(() => {
              this.connections.delete(connection);
              this.metrics.streamConnections.dec();
              this.countBytes(connection, session.stats());
              unwatch();
              void this.redis.shared().hdel(this.redis.key(streamStatsKey(workspace.id)), session.id).catch(() => undefined);
            });
          })
          .catch((err: Error) => {
            server.destroy();
            ws.close(1002, err.message.slice(0, 120));
          });
      });
    } catch (err) {
      vnc?.destroy();
      refuseUpgrade(socket, err, { dependencyMayFail: !admitted, desktopPart: 'desktop', logger: this.logger, logLabel: `stream ${match[1]}` });
    }
  }

  /** Closes the owner connections that had no key, pointer or clipboard input for their idle_disconnect. */
  private closeIdle(): void {
    for (const { session, idleLimitMs, idleReason } of this.connections) {
      if (idleLimitMs > 0 && session.idleMs() >= idleLimitMs) session.close(idleReason, 'proxy', undefined, IDLE_CLOSE_CODE);
    }
  }

  /** Adds what the connection moved since the last count (every stats interval and at close) to the byte counters. */
  private countBytes(connection: Connection, stats: { bytesToClient: number; bytesFromClient: number }): void {
    const { counted } = connection;
    if (stats.bytesToClient > counted.toClient) this.metrics.streamBytes.inc({ direction: 'to_client' }, stats.bytesToClient - counted.toClient);
    if (stats.bytesFromClient > counted.fromClient) this.metrics.streamBytes.inc({ direction: 'from_client' }, stats.bytesFromClient - counted.fromClient);
    counted.toClient = Math.max(counted.toClient, stats.bytesToClient);
    counted.fromClient = Math.max(counted.fromClient, stats.bytesFromClient);
  }

  private async publishStats(): Promise<void> {
    if (this.connections.size === 0) return;
    const pipeline = this.redis.shared().pipeline();
    for (const connection of this.connections) {
      const { session, workspaceId } = connection;
      const snapshot: StreamSnapshot = { stats: session.stats(), bottleneck: session.bottleneck(), at: Date.now() };
      this.countBytes(connection, snapshot.stats);
      const key = this.redis.key(streamStatsKey(workspaceId));
      pipeline.hset(key, session.id, JSON.stringify(snapshot)).expire(key, STREAM_STATS_TTL_SECONDS);
    }
    await pipeline.exec().catch((err: Error) => this.logger.warn(`stream stats: ${err.message}`));
  }
}
