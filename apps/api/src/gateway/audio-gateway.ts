import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { WebSocket, WebSocketServer } from 'ws';
import { ApiError, ErrorCode } from '@ws/common';
import { StreamStanding } from '@ws/workspaces';
import { openAudioPort } from './audio-credential';
import { OggOpusDemuxer } from './audio-ogg';
import { AudioKind, audioRefusal } from './audio-policy';
import { openDesktopTcp } from './desktop-tcp';
import { refuseUpgrade, StreamAdmission } from './stream-admission';

const CONNECT_TIMEOUT_MS = 10_000;
/** Until the port accepts the credential (the image's bridge itself waits 5 s for it). */
const CREDENTIAL_TIMEOUT_MS = 10_000;
/**
 * How long a port that is not listening yet is tried again, every SOUND_RETRY_MS: the reference desktop starts its
 * sound after its first window (or 5 s without one), so a user who unmutes as the desktop appears can come before
 * the bridges listen. Docker's port proxy accepts for the container and then hangs up, which looks like a refusal
 * of the credential; a refusal proper ends the same way after this bound.
 */
const SOUND_START_WAIT_MS = 10_000;
const SOUND_RETRY_MS = 250;
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
/** What each route reaches in the workspace, as the 502 refusal and the close reason name it. */
const DESKTOP_PART: Record<AudioKind, string> = { audio: 'sound', audio_input: 'microphone input' };

interface AudioConnection extends StreamStanding {
  workspaceId: string;
  kind: AudioKind;
  close(reason: string): void;
}

/**
 * The workspace's sound and microphone routes (`/api/stream/<id>/audio`, `/api/stream/<id>/audio_input`), handed
 * over by the StreamGateway. Admits through StreamAdmission as the VNC stream does (origin, rate limit, cookie,
 * WorkspaceAccess, closing on revoked tokens and locked users), then applies the workspace's effective allow_workspace_audio /
 * allow_workspace_microphone and view-only (403 on the upgrade). Both ports take only a client that first presents
 * the workspace's credential (audio-credential.ts), as the VNC port takes only its password; the browser never
 * sees it. Audio out: the image's audio port serves Ogg Opus; each Opus packet goes to the browser as one binary
 * message. Microphone in: each binary message is raw PCM (s16le, 48 kHz, mono) written to the image's audio_input port.
 */
@Injectable()
export class AudioGateway implements OnModuleDestroy {
  private readonly logger = new Logger(AudioGateway.name);
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_INPUT_MESSAGE_BYTES });
  private readonly connections = new Set<AudioConnection>();

  constructor(private readonly admission: StreamAdmission) {}

  onModuleDestroy(): void {
    for (const c of this.connections) c.close('the server is shutting down');
    this.wss.close();
  }

  async upgrade(request: IncomingMessage, socket: Socket, head: Buffer, workspaceId: string, kind: AudioKind): Promise<void> {
    let tcp: Socket | null = null;
    // Until the workspace's port is being reached, a failure is the database's or Redis's (503); after, the desktop's (502).
    let reachingDesktop = false;
    try {
      const grant = await this.admission.admit(request, workspaceId);
      const { workspace } = grant;
      if (workspace.status !== 'running') throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) is not running`);
      const refusal = audioRefusal(kind, grant.settings, grant.viewOnly);
      if (refusal) throw new ApiError(ErrorCode.Forbidden, refusal);
      const port = workspace.hostPorts[kind];
      // A VNC server image's workspace has no container, so no audio ports either.
      if (!port || !workspace.server) throw new ApiError(ErrorCode.InvalidState, `This workspace's image has no ${kind} port (port_map.${kind})`);
      reachingDesktop = true;
      const { publishHost } = workspace.server;
      const { socket: upstream, firstBytes } = await openAudioPort(
        () => openDesktopTcp(publishHost, port, CONNECT_TIMEOUT_MS),
        workspace.token,
        { credentialTimeoutMs: CREDENTIAL_TIMEOUT_MS, waitMs: SOUND_START_WAIT_MS, retryMs: SOUND_RETRY_MS },
      );
      tcp = upstream;
      // The browser gave up while the sound was starting.
      if (socket.destroyed) {
        upstream.destroy();
        return;
      }
      // A handshake the websocket server rejects never reaches the callback: the port's connection must not outlive it.
      let bridged = false;
      socket.once('close', () => {
        if (!bridged) upstream.destroy();
      });
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        bridged = true;
        const standing = { workspaceId: workspace.id, kind, sessionTokenId: grant.sessionTokenId, userId: grant.userId, ownerId: workspace.userId };
        this.bridge(ws, upstream, standing, firstBytes);
      });
    } catch (err) {
      tcp?.destroy();
      refuseUpgrade(socket, err, {
        dependencyMayFail: !reachingDesktop, desktopPart: DESKTOP_PART[kind], logger: this.logger, logLabel: `${kind} ${workspaceId}`,
      });
    }
  }

  /** `firstBytes`: what the port sent after accepting the credential; `tcp` is paused until the listeners are on. */
  private bridge(ws: WebSocket, tcp: Socket, standing: Omit<AudioConnection, 'close'>, firstBytes: Buffer): void {
    let closed = false;
    const connection: AudioConnection = {
      ...standing,
      close: (reason) => {
        if (closed) return;
        closed = true;
        this.connections.delete(connection);
        unwatch();
        tcp.destroy();
        if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000, reason.slice(0, 120));
      },
    };
    this.connections.add(connection);
    const unwatch = this.admission.watch(standing, (reason) => connection.close(reason));
    ws.on('close', () => connection.close('the browser closed the stream'));
    ws.on('error', () => connection.close('the browser connection failed'));
    tcp.on('close', () => connection.close(`the workspace's ${DESKTOP_PART[standing.kind]} ended`));

    if (standing.kind === 'audio') {
      const demuxer = new OggOpusDemuxer();
      ws.send(JSON.stringify(AUDIO_FORMAT));
      const forward = (chunk: Buffer) => {
        for (const packet of demuxer.push(chunk)) {
          if (ws.bufferedAmount > MAX_BROWSER_BACKLOG_BYTES) continue;
          ws.send(packet, { binary: true });
        }
      };
      if (firstBytes.length) forward(firstBytes);
      tcp.on('data', forward);
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
    tcp.resume();
  }
}
