/**
 * The stream gateway's core: one RfbSession bridges ONE browser websocket (noVNC, binary frames) and ONE TCP
 * connection to the workspace's VNC server. noVNC does its own RFB handshake through it; the session follows
 * both directions with RfbProtocolTracker (see rfb-parser.ts for what is rewritten or dropped), forwards the
 * server's bytes the moment they arrive, and keeps per-session statistics.
 */
import { randomBytes } from 'crypto';
import { connect as tcpConnect, Socket } from 'net';
import WebSocket from 'ws';
import { RfbError } from './errors';
import { encodingName } from './encodings';
import { RfbProtocolTracker, InputKind, RectInfo, UpdateInfo, UpdateRequestInfo } from './rfb-parser';
import {
  BottleneckFigures,
  CPU_EWMA_ALPHA,
  DEFAULT_FRAME_BUDGET_MS,
  DEFAULT_NETWORK_BUDGET_MS,
  NETWORK_EWMA_ALPHA,
  backlogDrainMs,
  computeBottleneck,
  ewma,
} from './bottleneck';

export const DEFAULT_HIGH_WATER_BYTES = 8 * 1024 * 1024;
export const DEFAULT_PING_INTERVAL_MS = 2000;
export const DEFAULT_MAX_PAUSED_MS = 60_000;
const STATS_WINDOW_MS = 5000;
const PING_EWMA_ALPHA = 0.3;
const DRAIN_POLL_MS = 20;
const MAX_PENDING_REQUESTS = 256;

/**
 * Receives what a session sends to the browser, for a session recording. Called synchronously on the hot path:
 * implementations must only copy and queue (the chunk's buffer is reused once the call returns).
 */
export interface RfbSessionRecorder {
  /** A chunk of the server → browser stream, from ServerInit on, as the browser received it. */
  serverChunk(chunk: Buffer): void;
  /** The raw 16-byte PIXEL_FORMAT of a SetPixelFormat the browser sent (applies from the next server message). */
  pixelFormat(raw: Buffer): void;
  /** Where the browser's pointer is (a PointerEvent forwarded to the server). */
  pointer(x: number, y: number): void;
}

export interface RfbSessionOptions {
  /** Drop keyboard, pointer, clipboard and resize messages from the browser. */
  viewOnly?: boolean;
  /** Forward the browser's clipboard (ClientCutText) to the workspace. Default true. */
  clipboardUp?: boolean;
  /** Forward the workspace's clipboard (ServerCutText) to the browser. Default true (see RfbTrackerOptions). */
  clipboardDown?: boolean;
  /** Both sides finished security elsewhere; the streams start at ClientInit/ServerInit (see RfbTrackerOptions). */
  preAuthenticated?: boolean;
  /** Called with each chunk once it has been written to the browser's socket (lets read buffers be reused). */
  onChunkSent?: (chunk: Buffer) => void;
  /** Records the stream (see RfbSessionRecorder); without one the session does no recording work at all. */
  recorder?: RfbSessionRecorder;
  workspaceId?: string;
  /** The user the browser session belongs to (RfbSessionRegistry 'auto' selects the owner's sessions). */
  userId?: string;
  /** Defaults to a random 8-hex-digit id. */
  clientId?: string;
  /** Websocket ping interval for RTT measurement. Default 2000 ms. */
  pingIntervalMs?: number;
  /** Pause reading the VNC socket when ws.bufferedAmount exceeds this. Default 8 MiB. */
  highWaterBytes?: number;
  /** Resume once ws.bufferedAmount is at or below this. Default highWaterBytes / 2. */
  lowWaterBytes?: number;
  /** Close the session when the browser has not drained its backlog for this long. Default 60 s. */
  maxPausedMs?: number;
  /** TCP connect bound for RfbSession.open(). Default 10 s. */
  connectTimeoutMs?: number;
  /** Frame budget for the cpu bottleneck figure. Default 1000/30 ms. */
  frameBudgetMs?: number;
  /** Latency budget for the network bottleneck figure. Default 50 ms. */
  networkBudgetMs?: number;
}

export type RfbCloseInitiator = 'client' | 'server' | 'proxy';

export interface RfbCloseInfo {
  reason: string;
  initiator: RfbCloseInitiator;
  error?: Error;
}

export interface EncodingStats {
  /** Rectangles received. */
  count: number;
  /** Sum of width*height. */
  area: number;
  /** Bytes including the 12-byte rectangle headers. */
  bytes: number;
  /** Sum over rectangles of (arrival of last payload byte − arrival of first header byte), ms. */
  timeMs: number;
}

export interface InputCounters {
  key: number;
  pointer: number;
  clipboard: number;
  resize: number;
  total: number;
}

export interface RfbSessionStats {
  client: string;
  workspaceId?: string;
  userId?: string;
  viewOnly: boolean;
  connectedAt: Date;
  /** 'handshake' until ServerInit, then 'streaming'; 'closed' afterwards. */
  phase: 'handshake' | 'streaming' | 'closed';
  /** Bytes received from the browser. */
  bytesFromClient: number;
  /** Bytes written to the VNC server (after SetEncodings rewriting and view-only drops). */
  bytesToServer: number;
  /** Bytes received from the VNC server. */
  bytesFromServer: number;
  /** Bytes sent to the browser. */
  bytesToClient: number;
  /** Completed FramebufferUpdate messages. */
  updates: number;
  /** Current framebuffer size (ServerInit, DesktopSize, ExtendedDesktopSize). */
  resx: number;
  resy: number;
  /** Percent of the framebuffer covered by the pixel rects of the last complete update (capped at 100). */
  changed: number;
  /** Per encoding name ('raw', 'copyrect', 'tight', 'zrle', 'cursor', 'desktopsize', ...). */
  encodings: Record<string, EncodingStats>;
  /** ms from a FramebufferUpdateRequest to the end of the update answering it (last such update). */
  server_time: number | null;
  /** EWMA of server_time. */
  server_time_avg: number | null;
  /** Updates per second over the last 5 s. */
  updateRate: number;
  /** Last websocket ping round trip, ms. */
  pingMs: number | null;
  /** EWMA (α = 0.3) of the ping round trip, ms. */
  pingAvgMs: number | null;
  /** ws.bufferedAmount now. */
  bufferedBytes: number;
  /** True while the VNC socket is paused for backpressure. */
  paused: boolean;
  inputForwarded: InputCounters;
  inputDropped: InputCounters;
  /** The workspace's clipboard messages (ServerCutText) forwarded to the browser, and cut out (clipboardDown off). */
  clipboardDown: { forwarded: number; dropped: number };
  /** Encodings the browser asked for and the ones kept by the proxy (last SetEncodings). */
  encodingsRequested: number[];
  encodingsNegotiated: number[];
  /** Server desktop name from ServerInit. */
  desktopName: string;
}

const counters = (): InputCounters => ({ key: 0, pointer: 0, clipboard: 0, resize: 0, total: 0 });
const round1 = (x: number) => Math.round(x * 10) / 10;

function toBuffer(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

export class RfbSession {
  private readonly onChunkSent?: (chunk: Buffer) => void;
  private readonly recorder?: RfbSessionRecorder;
  readonly id: string;
  readonly connectedAt = new Date();
  readonly viewOnly: boolean;
  readonly workspaceId?: string;
  readonly userId?: string;

  private readonly tracker: RfbProtocolTracker;
  private readonly closeListeners: ((info: RfbCloseInfo) => void)[] = [];
  private closeInfo: RfbCloseInfo | undefined;
  private readonly highWater: number;
  private readonly lowWater: number;
  private readonly maxPausedMs: number;
  private readonly frameBudgetMs: number;
  private readonly networkBudgetMs: number;
  private readonly startedAt = performance.now();

  private bytesFromClient = 0;
  private bytesToServer = 0;
  private bytesFromServer = 0;
  private bytesToClient = 0;
  private updates = 0;
  private changed = 0;
  private updateArea = 0;
  private readonly encodingStats = new Map<string, EncodingStats>();
  private readonly pendingRequests: UpdateRequestInfo[] = [];
  private serverTime: number | undefined;
  private serverTimeAvg: number | undefined;
  private readonly updateEnds: number[] = [];
  private readonly processing: { at: number; ms: number }[] = [];
  private processingEwma: number | undefined;
  private readonly inputForwarded = counters();
  private readonly inputDropped = counters();
  private readonly clipboardDownCounts = { forwarded: 0, dropped: 0 };
  /** performance.now() of the last key, pointer or clipboard message from the browser (forwarded or not). */
  private lastInputAt = performance.now();
  private encodingsRequested: number[] = [];

  private pingTimer: NodeJS.Timeout | undefined;
  private pingSeq = 0;
  private outstandingPing: { seq: number; sentAt: number } | undefined;
  private pingMs: number | undefined;
  private pingAvgMs: number | undefined;
  private networkEwma: number | undefined;
  private readonly deliverySamples: { at: number; delivered: number }[] = [];

  private paused = false;
  private pausedSince = 0;
  private pausedTotal = 0;
  private pausedAtUpdateStart = 0;
  private drainTimer: NodeJS.Timeout | undefined;
  private wsPausedForServer = false;

  /**
   * Wraps an open websocket and a (connected or still connecting) TCP socket to the VNC server. Writes
   * while the socket is still connecting are buffered by node.
   */
  constructor(
    private readonly ws: WebSocket,
    private readonly socket: Socket,
    options: RfbSessionOptions = {},
  ) {
    this.id = options.clientId ?? randomBytes(4).toString('hex');
    this.viewOnly = options.viewOnly ?? false;
    this.onChunkSent = options.onChunkSent;
    this.recorder = options.recorder;
    this.workspaceId = options.workspaceId;
    this.userId = options.userId;
    this.highWater = options.highWaterBytes ?? DEFAULT_HIGH_WATER_BYTES;
    this.lowWater = options.lowWaterBytes ?? Math.floor(this.highWater / 2);
    this.maxPausedMs = options.maxPausedMs ?? DEFAULT_MAX_PAUSED_MS;
    this.frameBudgetMs = options.frameBudgetMs ?? DEFAULT_FRAME_BUDGET_MS;
    this.networkBudgetMs = options.networkBudgetMs ?? DEFAULT_NETWORK_BUDGET_MS;

    this.tracker = new RfbProtocolTracker({
      viewOnly: this.viewOnly,
      clipboardUp: options.clipboardUp ?? true,
      clipboardDown: options.clipboardDown ?? true,
      preAuthenticated: options.preAuthenticated ?? false,
      toServer: (chunk) => this.writeToServer(chunk),
      toClient: (chunk) => this.sendToClient(chunk),
      onError: (error, direction) => this.close(`${direction === 'client' ? 'browser' : 'VNC server'} protocol error: ${error.message}`, 'proxy', error),
      events: {
        onEncodings: (requested) => {
          this.encodingsRequested = requested;
        },
        onUpdateRequest: (request) => {
          this.pendingRequests.push(request);
          if (this.pendingRequests.length > MAX_PENDING_REQUESTS) this.pendingRequests.shift();
        },
        onUpdateStart: () => {
          this.updateArea = 0;
          this.pausedAtUpdateStart = this.pausedMsTotal();
        },
        onRect: (rect) => this.recordRect(rect),
        onUpdateEnd: (update) => this.recordUpdate(update),
        onInput: (kind, forwarded) => this.recordInput(kind, forwarded),
        onServerMessage: (kind, _bytes, forwarded) => {
          if (kind === 'cuttext') this.clipboardDownCounts[forwarded ? 'forwarded' : 'dropped']++;
        },
        onSetPixelFormat: options.recorder ? (raw) => options.recorder?.pixelFormat(raw) : undefined,
        onPointer: options.recorder ? (x, y) => options.recorder?.pointer(x, y) : undefined,
      },
    });

    ws.binaryType = 'nodebuffer';
    ws.on('message', (data, isBinary) => {
      if (this.closeInfo) return;
      if (!isBinary) {
        this.close('browser sent a text frame; RFB needs binary frames', 'proxy', new RfbError('protocol', 'text websocket frame'));
        return;
      }
      const chunk = toBuffer(data);
      this.bytesFromClient += chunk.length;
      this.tracker.pushFromClient(chunk);
    });
    ws.on('pong', (data) => this.onPong(data));
    ws.on('close', (code) => this.close(`browser closed the websocket (${code})`, 'client'));
    ws.on('error', (error) => this.close(`websocket error: ${error.message}`, 'client', error));

    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      if (this.closeInfo) return;
      this.bytesFromServer += chunk.length;
      this.tracker.pushFromServer(chunk);
    });
    socket.on('drain', () => {
      if (this.wsPausedForServer) {
        this.wsPausedForServer = false;
        this.ws.resume();
      }
    });
    socket.on('end', () => this.close(this.tracker.state.securityFailure ? `VNC server refused: ${this.tracker.state.securityFailure}` : 'VNC server closed the connection', 'server'));
    socket.on('close', () => this.close('VNC server connection closed', 'server'));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const rfbError =
        error.code === 'ECONNREFUSED' ? new RfbError('connection_refused', 'VNC server refused the connection') : new RfbError('connection_failed', `VNC server connection failed: ${error.code ?? error.message}`);
      this.close(rfbError.message, 'server', rfbError);
    });

    const interval = options.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS;
    this.pingTimer = setInterval(() => this.ping(), interval);
    this.pingTimer.unref();
    this.ping();
  }

  /**
   * Connects to the VNC server and bridges it to `ws`. Resolves once TCP is connected; on failure closes the
   * websocket (1011) and rejects with RfbError (connection_refused, connection_failed, timeout).
   */
  static open(ws: WebSocket, host: string, port: number, options: RfbSessionOptions = {}): Promise<RfbSession> {
    const socket = tcpConnect({ host, port });
    const session = new RfbSession(ws, socket, options);
    const timeoutMs = options.connectTimeoutMs ?? 10_000;
    return new Promise<RfbSession>((resolve, reject) => {
      const timer = setTimeout(() => {
        const error = new RfbError('timeout', `timed out connecting to the VNC server at ${host}:${port}`);
        session.close(error.message, 'proxy', error);
        reject(error);
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(session);
      });
      session.onClose((info) => {
        clearTimeout(timer);
        reject(info.error ?? new RfbError('closed', info.reason));
      });
    });
  }

  get closed(): boolean {
    return this.closeInfo !== undefined;
  }

  get closeReason(): RfbCloseInfo | undefined {
    return this.closeInfo;
  }

  /** Called once when the session closes (immediately, asynchronously, if it already has). */
  onClose(listener: (info: RfbCloseInfo) => void): void {
    if (this.closeInfo) {
      const info = this.closeInfo;
      queueMicrotask(() => listener(info));
    } else {
      this.closeListeners.push(listener);
    }
  }

  /** Milliseconds since the browser last sent a key, pointer or clipboard message (or since the session opened). */
  idleMs(now = performance.now()): number {
    return now - this.lastInputAt;
  }

  /**
   * Closes both sides (idempotent). Websocket close code: `code` when given (4000-4999: the application's own,
   * for the browser client to tell reasons apart), else 1000 normal, 1002 protocol error, 1011 otherwise.
   */
  close(reason = 'closed by the server', initiator: RfbCloseInitiator = 'proxy', error?: Error, code?: number): void {
    if (this.closeInfo) return;
    this.closeInfo = { reason, initiator, error };
    if (this.pingTimer) clearInterval(this.pingTimer);
    if (this.drainTimer) clearInterval(this.drainTimer);
    this.pingTimer = undefined;
    this.drainTimer = undefined;
    if (this.paused) this.pausedTotal += performance.now() - this.pausedSince;
    this.paused = false;
    if (!this.socket.destroyed) {
      if (initiator === 'server') {
        this.socket.destroy();
      } else {
        // Let already-queued bytes reach the server, but never wait on it for long.
        this.socket.end();
        setTimeout(() => this.socket.destroy(), 1000).unref();
      }
    }
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) {
      const closeCode = code ?? (error instanceof RfbError && error.kind === 'protocol' ? 1002 : error ? 1011 : 1000);
      const text = Buffer.from(reason, 'utf8').subarray(0, 120).toString('utf8').replace(/\uFFFD+$/, '');
      try {
        this.ws.close(closeCode, text);
      } catch {
        this.ws.terminate();
      }
    }
    const listeners = this.closeListeners.splice(0);
    for (const listener of listeners) {
      try {
        listener(this.closeInfo);
      } catch {
        // a failing listener must not prevent the others from running
      }
    }
  }

  // ---------------------------------------------------------------- forwarding and backpressure

  private writeToServer(chunk: Buffer): void {
    if (this.closeInfo || this.socket.destroyed) return;
    this.bytesToServer += chunk.length;
    this.socket.write(chunk);
    if (!this.wsPausedForServer && this.socket.writableLength > this.highWater) {
      this.wsPausedForServer = true;
      this.ws.pause();
    }
  }

  private sendToClient(chunk: Buffer): void {
    if (this.closeInfo || this.ws.readyState !== WebSocket.OPEN) return;
    this.bytesToClient += chunk.length;
    // Before ServerInit only handshake bytes pass (none at all when pre-authenticated); a recording starts at ServerInit.
    if (this.recorder && this.tracker.state.serverInitDone) this.recorder.serverChunk(chunk);
    // Sends made above lowWater report their completion, so a pause ends as soon as the backlog is down to
    // lowWater (an event, not the poll: a fast link would idle between polls).
    const watch = this.ws.bufferedAmount + chunk.length > this.lowWater;
    const sent = this.onChunkSent;
    this.ws.send(chunk, { binary: true }, sent ? () => (sent(chunk), watch && this.onSentWhilePaused()) : watch ? this.onSentWhilePaused : undefined);
    if (!this.paused && this.ws.bufferedAmount > this.highWater) {
      this.paused = true;
      this.pausedSince = performance.now();
      this.socket.pause();
      this.drainTimer = setInterval(() => this.pollDrain(), DRAIN_POLL_MS);
      this.drainTimer.unref();
    }
  }

  private readonly onSentWhilePaused = (): void => {
    if (this.paused && !this.closeInfo && this.ws.bufferedAmount <= this.lowWater) this.pollDrain();
  };

  /** Resumes reading once the backlog is down to lowWater; the timer only catches a browser that stalls. */
  private pollDrain(): void {
    if (!this.paused || this.closeInfo) return;
    const now = performance.now();
    if (this.ws.bufferedAmount <= this.lowWater) {
      this.paused = false;
      this.pausedTotal += now - this.pausedSince;
      if (this.drainTimer) clearInterval(this.drainTimer);
      this.drainTimer = undefined;
      this.socket.resume();
    } else if (now - this.pausedSince > this.maxPausedMs) {
      this.close(`browser did not drain ${this.ws.bufferedAmount} buffered bytes within ${this.maxPausedMs} ms`, 'proxy', new RfbError('timeout', 'backpressure timeout'));
    }
  }

  private pausedMsTotal(now = performance.now()): number {
    return this.pausedTotal + (this.paused ? now - this.pausedSince : 0);
  }

  // ---------------------------------------------------------------- ping

  private ping(): void {
    if (this.closeInfo || this.ws.readyState !== WebSocket.OPEN) return;
    this.sampleDelivery();
    if (this.outstandingPing) return; // one in flight at a time keeps the RTT unambiguous
    const seq = ++this.pingSeq;
    const payload = Buffer.alloc(4);
    payload.writeUInt32BE(seq, 0);
    this.outstandingPing = { seq, sentAt: performance.now() };
    try {
      this.ws.ping(payload);
    } catch {
      this.outstandingPing = undefined;
    }
  }

  private onPong(data: Buffer): void {
    const outstanding = this.outstandingPing;
    if (!outstanding || data.length !== 4 || data.readUInt32BE(0) !== outstanding.seq) return;
    this.outstandingPing = undefined;
    const now = performance.now();
    const rtt = now - outstanding.sentAt;
    this.pingMs = rtt;
    this.pingAvgMs = ewma(this.pingAvgMs, rtt, PING_EWMA_ALPHA);
    this.sampleDelivery();
    this.networkEwma = ewma(this.networkEwma, rtt + backlogDrainMs(this.ws.bufferedAmount, this.deliveryRate(now)), NETWORK_EWMA_ALPHA);
  }

  private sampleDelivery(now = performance.now()): void {
    const last = this.deliverySamples[this.deliverySamples.length - 1];
    if (last && now - last.at < 100) return;
    this.deliverySamples.push({ at: now, delivered: this.bytesToClient - this.ws.bufferedAmount });
    // Keep one sample older than the window as its left edge.
    while (this.deliverySamples.length > 2 && now - this.deliverySamples[1].at > STATS_WINDOW_MS) this.deliverySamples.shift();
  }

  /** Bytes per second the websocket took off its backlog over (about) the last 5 s. */
  private deliveryRate(now = performance.now()): number | undefined {
    const first = this.deliverySamples[0];
    if (!first) return undefined;
    const elapsed = now - first.at;
    if (elapsed <= 0) return undefined;
    const delivered = this.bytesToClient - this.ws.bufferedAmount - first.delivered;
    return (delivered / elapsed) * 1000;
  }

  // ---------------------------------------------------------------- statistics

  private recordRect(rect: RectInfo): void {
    const name = encodingName(rect.encoding);
    let stats = this.encodingStats.get(name);
    if (!stats) {
      stats = { count: 0, area: 0, bytes: 0, timeMs: 0 };
      this.encodingStats.set(name, stats);
    }
    stats.count++;
    stats.area += rect.width * rect.height;
    stats.bytes += rect.bytes;
    stats.timeMs += rect.timeMs;
  }

  private recordUpdate(update: UpdateInfo): void {
    this.updates++;
    const { width, height } = this.tracker.state;
    const area = width * height;
    this.changed = area > 0 ? Math.min(100, Math.round((update.pixelArea / area) * 10000) / 100) : 0;
    const now = update.lastByteAt;
    this.updateEnds.push(now);
    while (this.updateEnds.length && now - this.updateEnds[0] > STATS_WINDOW_MS) this.updateEnds.shift();
    this.sampleDelivery();

    // Requests that reached the server before it started this update are all answered by it
    // (servers coalesce pending requests); the oldest one defines server_time.
    let matched: UpdateRequestInfo | undefined;
    while (this.pendingRequests.length && this.pendingRequests[0].at <= update.firstByteAt) {
      const request = this.pendingRequests.shift() as UpdateRequestInfo;
      matched ??= request;
    }
    if (!matched) return; // unsolicited update (e.g. after a resize)
    const paused = this.pausedMsTotal(now) - this.pausedAtUpdateStart;
    this.serverTime = update.lastByteAt - matched.at;
    this.serverTimeAvg = ewma(this.serverTimeAvg, this.serverTime, CPU_EWMA_ALPHA);
    const busy = matched.incremental ? update.lastByteAt - update.firstByteAt : this.serverTime;
    const processing = Math.max(0, busy - paused);
    this.processing.push({ at: now, ms: processing });
    while (this.processing.length && now - this.processing[0].at > STATS_WINDOW_MS) this.processing.shift();
    this.processingEwma = ewma(this.processingEwma, processing, CPU_EWMA_ALPHA);
  }

  private recordInput(kind: InputKind, forwarded: boolean): void {
    const c = forwarded ? this.inputForwarded : this.inputDropped;
    c[kind]++;
    c.total++;
    if (kind !== 'resize') this.lastInputAt = performance.now();
  }

  stats(): RfbSessionStats {
    const now = performance.now();
    while (this.updateEnds.length && now - this.updateEnds[0] > STATS_WINDOW_MS) this.updateEnds.shift();
    const window = Math.max(1000, Math.min(STATS_WINDOW_MS, now - this.startedAt));
    const state = this.tracker.state;
    const encodings: Record<string, EncodingStats> = {};
    for (const [name, s] of this.encodingStats) encodings[name] = { ...s, timeMs: round1(s.timeMs) };
    const opt = (x: number | undefined) => (x === undefined ? null : round1(x));
    return {
      client: this.id,
      workspaceId: this.workspaceId,
      userId: this.userId,
      viewOnly: this.viewOnly,
      connectedAt: this.connectedAt,
      phase: this.closeInfo ? 'closed' : state.serverInitDone ? 'streaming' : 'handshake',
      bytesFromClient: this.bytesFromClient,
      bytesToServer: this.bytesToServer,
      bytesFromServer: this.bytesFromServer,
      bytesToClient: this.bytesToClient,
      updates: this.updates,
      resx: state.width,
      resy: state.height,
      changed: this.changed,
      encodings,
      server_time: opt(this.serverTime),
      server_time_avg: opt(this.serverTimeAvg),
      updateRate: Math.round((this.updateEnds.length / (window / 1000)) * 100) / 100,
      pingMs: opt(this.pingMs),
      pingAvgMs: opt(this.pingAvgMs),
      bufferedBytes: this.ws.bufferedAmount,
      paused: this.paused,
      inputForwarded: { ...this.inputForwarded },
      inputDropped: { ...this.inputDropped },
      clipboardDown: { ...this.clipboardDownCounts },
      encodingsRequested: [...this.encodingsRequested],
      encodingsNegotiated: [...state.encodings],
      desktopName: state.name,
    };
  }

  /** [cpu, cpu_avg, network, network_avg], 0–10, lower = more constrained (formulas in bottleneck.ts). */
  bottleneck(): BottleneckFigures {
    const now = performance.now();
    while (this.processing.length && now - this.processing[0].at > STATS_WINDOW_MS) this.processing.shift();
    const recent = this.processing.length ? this.processing.reduce((sum, p) => sum + p.ms, 0) / this.processing.length : undefined;
    let rtt = this.pingMs;
    if (this.outstandingPing) {
      // An unanswered ping older than the last RTT is itself evidence of a slow (or stalled) browser link.
      const age = now - this.outstandingPing.sentAt;
      if (rtt === undefined || age > rtt) rtt = age;
    }
    return computeBottleneck({
      processingMs: recent,
      processingEwmaMs: this.processingEwma,
      rttMs: rtt,
      networkEwmaMs: this.networkEwma,
      bufferedBytes: this.ws.bufferedAmount,
      drainBytesPerSec: this.deliveryRate(now),
      frameBudgetMs: this.frameBudgetMs,
      networkBudgetMs: this.networkBudgetMs,
    });
  }
}

/** Which sessions a frame-stats request means: none, the workspace owner's ('auto'), all, or one client id. */
export type RfbClientSelector = 'none' | 'auto' | 'all' | (string & {});

/** Live sessions per workspace; sessions remove themselves when they close. */
export class RfbSessionRegistry {
  private readonly byWorkspace = new Map<string, Set<RfbSession>>();

  add(workspaceId: string, session: RfbSession): void {
    if (session.closed) return;
    let set = this.byWorkspace.get(workspaceId);
    if (!set) {
      set = new Set();
      this.byWorkspace.set(workspaceId, set);
    }
    set.add(session);
    session.onClose(() => this.remove(workspaceId, session));
  }

  remove(workspaceId: string, session: RfbSession): boolean {
    const set = this.byWorkspace.get(workspaceId);
    if (!set) return false;
    const removed = set.delete(session);
    if (set.size === 0) this.byWorkspace.delete(workspaceId);
    return removed;
  }

  /** Sessions of one workspace, or of all workspaces, oldest first. */
  list(workspaceId?: string): RfbSession[] {
    const sets = workspaceId === undefined ? [...this.byWorkspace.values()] : [this.byWorkspace.get(workspaceId) ?? new Set<RfbSession>()];
    return sets.flatMap((s) => [...s]).sort((a, b) => a.connectedAt.getTime() - b.connectedAt.getTime());
  }

  count(workspaceId: string): number {
    return this.byWorkspace.get(workspaceId)?.size ?? 0;
  }

  /** The session with this client id, in any workspace (or only in `workspaceId`). */
  get(clientId: string, workspaceId?: string): RfbSession | undefined {
    return this.list(workspaceId).find((s) => s.id === clientId);
  }

  /**
   * Sessions selected by a frame-stats `client` value: 'none' → [], 'auto' → the sessions of `ownerUserId`
   * only, 'all' → every session of the workspace, anything else → the session with that client id (or []).
   */
  select(workspaceId: string, client: RfbClientSelector, ownerUserId?: string): RfbSession[] {
    const sessions = this.list(workspaceId);
    switch (client) {
      case 'none':
        return [];
      case 'auto':
        return ownerUserId === undefined ? [] : sessions.filter((s) => s.userId === ownerUserId);
      case 'all':
        return sessions;
      default:
        return sessions.filter((s) => s.id === client);
    }
  }

  /** Closes every session of a workspace (e.g. when it stops); returns how many were open. */
  closeAll(workspaceId: string, reason: string): number {
    const sessions = this.list(workspaceId);
    for (const s of sessions) s.close(reason, 'proxy');
    return sessions.length;
  }
}
