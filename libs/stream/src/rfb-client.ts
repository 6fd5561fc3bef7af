/**
 * A minimal RFB (RFC 6143) client for screenshots and probes: handshake (3.3/3.7/3.8, security None or
 * VNC Authentication), ClientInit shared, ServerInit, then 32 bpp RGBX pixels with Raw/CopyRect/DesktopSize.
 * Every wait is bounded by a deadline; failures are RfbError with a stable `kind`.
 * It speaks over any Duplex: a TCP socket (`connect`) or e.g. `createWebSocketStream` (`fromStream`).
 */
import { connect as tcpConnect, Socket } from 'net';
import type { Duplex } from 'stream';
import { RfbError } from './errors';
import { Encoding } from './encodings';
import { Need, read, skip } from './feeder';
import { ParserRunner } from './parser-runner';
import { PixelFormat, RGBX32, encodePixelFormat } from './pixel-format';
import { negotiateAsClient } from './rfb-handshake';
import { RectHeader, ServerMessage, readColourMapHeader, readCutTextHeader, readRectHeader, readServerInit, readUpdateHeader } from './rfb-messages';

export const DEFAULT_RFB_TIMEOUT_MS = 10_000;
/** ServerCutText up to this size is kept (serverCutTexts); longer ones are skipped. */
const MAX_KEPT_CUT_TEXT_BYTES = 1024 * 1024;
/** Framebuffers above this many pixels are refused (8K UHD is 33.2 Mpx). */
export const DEFAULT_MAX_PIXELS = 40_000_000;

export interface RfbConnectOptions {
  /** VNC Authentication password (first 8 bytes count). Needed only when the server offers no None type. */
  password?: string;
  /** Bound for TCP connect + the whole handshake. Default 10 s. */
  timeoutMs?: number;
  /** ClientInit shared flag. Default true (other viewers stay connected). */
  shared?: boolean;
  /** Refuse framebuffers larger than this. Default 40 Mpx. */
  maxPixels?: number;
}

export interface RfbServerInfo {
  /** Server's ProtocolVersion, e.g. "RFB 003.008". */
  serverVersion: string;
  /** Version we replied with (flow used): "3.3" | "3.7" | "3.8". */
  version: '3.3' | '3.7' | '3.8';
  securityType: number;
  width: number;
  height: number;
  /** The server's native pixel format from ServerInit (we switch to RGBX32 right after). */
  pixelFormat: PixelFormat;
  name: string;
}

/** An RGBA framebuffer (4 bytes per pixel, alpha 255). */
export interface RfbFrame {
  width: number;
  height: number;
  data: Buffer;
}

export type RfbRect = RectHeader;

type Reader<T> = Generator<Need, T, Buffer | undefined>;

export interface RfbCaptureOptions {
  /** Bound for the whole capture. Default 10 s. */
  timeoutMs?: number;
  /**
   * After the full frame, keep applying incremental updates until the server has been quiet for this long
   * (0 = off, the default here). Poll-based servers such as x11vnc answer a new client's first request from
   * their last snapshot and send what changed while nobody was connected ~0.5 s later.
   */
  settleMs?: number;
  /** Upper bound of the settle phase. Default 4 × settleMs (never beyond timeoutMs). */
  maxSettleMs?: number;
}

export interface RfbUpdateOptions {
  incremental?: boolean;
  timeoutMs?: number;
}

function socketError(error: NodeJS.ErrnoException, host: string, port: number): RfbError {
  if (error.code === 'ECONNREFUSED') return new RfbError('connection_refused', `connection refused by ${host}:${port}`);
  return new RfbError('connection_failed', `cannot connect to ${host}:${port}: ${error.code ?? error.message}`);
}

export class RfbClient {
  private framebuffer: Buffer;
  private fbWidth: number;
  private fbHeight: number;
  private busy = false;
  private closed = false;
  /** The texts of the ServerCutText messages read so far (latin1; the newest 16), oldest first. */
  readonly serverCutTexts: string[] = [];

  private constructor(
    private readonly stream: Duplex,
    private readonly reader: ParserRunner,
    readonly info: RfbServerInfo,
    private readonly maxPixels: number,
  ) {
    this.fbWidth = info.width;
    this.fbHeight = info.height;
    this.framebuffer = Buffer.alloc(info.width * info.height * 4);
  }

  /** TCP connect + handshake. Rejects with RfbError (connection_refused, timeout, auth_failed, ...). */
  static async connect(host: string, port: number, options: RfbConnectOptions = {}): Promise<RfbClient> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_RFB_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const socket: Socket = tcpConnect({ host, port });
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        socket.destroy();
        reject(new RfbError('timeout', `timed out connecting to ${host}:${port} after ${timeoutMs} ms`));
      }, timeoutMs);
      const onError = (error: Error) => {
        cleanup();
        socket.destroy();
        reject(socketError(error, host, port));
      };
      const onConnect = () => {
        cleanup();
        resolve();
      };
      const cleanup = () => {
        clearTimeout(timer);
        socket.off('error', onError);
        socket.off('connect', onConnect);
      };
      socket.once('error', onError);
      socket.once('connect', onConnect);
    });
    return RfbClient.handshake(socket, options, deadline);
  }

  /** Handshake over an already-open Duplex (e.g. a websocket stream through the proxy). */
  static async fromStream(stream: Duplex, options: RfbConnectOptions = {}): Promise<RfbClient> {
    return RfbClient.handshake(stream, options, Date.now() + (options.timeoutMs ?? DEFAULT_RFB_TIMEOUT_MS));
  }

  private static async handshake(stream: Duplex, options: RfbConnectOptions, deadline: number): Promise<RfbClient> {
    const reader = new ParserRunner();
    stream.on('data', (chunk: Buffer) => reader.push(chunk));
    const end = (error?: Error) => reader.end(error ? new RfbError('closed', `connection lost: ${error.message}`) : new RfbError('closed', 'server closed the connection'));
    stream.on('end', () => end());
    stream.on('close', () => end());
    stream.on('error', (error: Error) => end(error));
    const write = (buf: Buffer) => stream.write(buf);
    try {
      const { serverVersion, flow, securityType } = await reader.run(negotiateAsClient(options.password, write), deadline, 'the server handshake');
      write(Buffer.from([options.shared === false ? 0 : 1]));
      const init = await reader.run(readServerInit(), deadline, 'ServerInit');
      const info: RfbServerInfo = {
        serverVersion,
        version: flow === 3 ? '3.3' : flow === 7 ? '3.7' : '3.8',
        securityType,
        width: init.width,
        height: init.height,
        pixelFormat: init.pixelFormat,
        name: init.name,
      };
      const maxPixels = options.maxPixels ?? DEFAULT_MAX_PIXELS;
      if (info.width * info.height > maxPixels) throw new RfbError('protocol', `framebuffer ${info.width}x${info.height} exceeds ${maxPixels} pixels`);

      // SetPixelFormat RGBX32, SetEncodings Raw, CopyRect, DesktopSize.
      write(Buffer.concat([Buffer.from([0, 0, 0, 0]), encodePixelFormat(RGBX32)]));
      const encodings = [Encoding.Raw, Encoding.CopyRect, Encoding.DesktopSize];
      const setEncodings = Buffer.alloc(4 + 4 * encodings.length);
      setEncodings[0] = 2;
      setEncodings.writeUInt16BE(encodings.length, 2);
      encodings.forEach((e, i) => setEncodings.writeInt32BE(e, 4 + 4 * i));
      write(setEncodings);
      return new RfbClient(stream, reader, info, maxPixels);
    } catch (error) {
      stream.destroy();
      throw error;
    }
  }

  get width(): number {
    return this.fbWidth;
  }

  get height(): number {
    return this.fbHeight;
  }

  /** A copy of the current RGBA framebuffer. */
  frame(): RfbFrame {
    return { width: this.fbWidth, height: this.fbHeight, data: Buffer.from(this.framebuffer) };
  }

  /** Set when a capped settle abandoned a message half read: only close() is valid afterwards. */
  private desynchronized = false;

  private write(buf: Buffer): void {
    if (this.closed) throw new RfbError('closed', 'client is closed');
    if (this.desynchronized) throw new RfbError('protocol', 'the stream was left mid-message by a capped settle; open a new client');
    this.stream.write(buf);
  }

  private requestUpdate(incremental: boolean): void {
    const msg = Buffer.alloc(10);
    msg[0] = 3;
    msg[1] = incremental ? 1 : 0;
    msg.writeUInt16BE(this.fbWidth, 6);
    msg.writeUInt16BE(this.fbHeight, 8);
    this.write(msg);
  }

  /**
   * Requests the whole screen non-incrementally and applies FramebufferUpdates until every pixel has been
   * covered once (servers may split the answer over several updates; a DesktopSize restarts the count);
   * then, with `settleMs`, applies incremental updates until the server stays quiet (see RfbCaptureOptions).
   */
  async captureFrame(options: RfbCaptureOptions = {}): Promise<RfbFrame> {
    const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_RFB_TIMEOUT_MS);
    const settleMs = options.settleMs ?? 0;
    return this.exclusive(async () => {
      for (;;) {
        await this.coverFullFrame(deadline);
        if (settleMs <= 0 || !(await this.settle(deadline, settleMs, options.maxSettleMs ?? 4 * settleMs))) return this.frame();
        // The framebuffer was resized while settling: capture the new one from scratch.
      }
    });
  }

  private async coverFullFrame(deadline: number): Promise<void> {
    let covered = new Uint8Array(this.fbWidth * this.fbHeight);
    let coveredCount = 0;
    let total = covered.length;
    this.requestUpdate(false);
    while (coveredCount < total) {
      let resized = false;
      const rects = await this.readUntilUpdate(deadline, () => {
        resized = true;
      });
      if (resized) {
        covered = new Uint8Array(this.fbWidth * this.fbHeight);
        coveredCount = 0;
        total = covered.length;
      }
      for (const r of rects) {
        if (r.encoding !== Encoding.Raw && r.encoding !== Encoding.CopyRect) continue;
        for (let y = r.y; y < r.y + r.height; y++) {
          const row = y * this.fbWidth;
          for (let x = r.x; x < r.x + r.width; x++) {
            if (!covered[row + x]) {
              covered[row + x] = 1;
              coveredCount++;
            }
          }
        }
      }
      // Not covered yet (partial answer, or a resize mid-way): ask again for the whole (new) screen.
      if (coveredCount < total) this.requestUpdate(false);
    }
  }

  /** Applies incremental updates until `quietMs` pass without one. Returns true if the framebuffer was resized. */
  private async settle(deadline: number, quietMs: number, maxMs: number): Promise<boolean> {
    const end = Math.min(deadline, Date.now() + maxMs);
    let resized = false;
    let requested = false;
    while (Date.now() < end) {
      if (!requested) this.requestUpdate(true);
      requested = true;
      if (!(await this.reader.waitForData(Math.min(end, Date.now() + quietMs)))) break; // quiet
      let rects: RfbRect[] | null;
      try {
        // The cap bounds reading too: an update still trickling in at the cap is abandoned, keeping the
        // rectangles applied so far. The stream is then mid-message, so the client cannot be used again.
        rects = await this.readMessage(Math.min(deadline, end), () => {
          resized = true;
        });
      } catch (err) {
        if (!(err instanceof RfbError) || err.kind !== 'timeout' || Date.now() >= deadline) throw err;
        this.desynchronized = true;
        return false;
      }
      if (rects) requested = false; // answered: ask for the next change
      if (resized) return true;
    }
    // An incremental request may still be pending; its answer is applied by the next read, harmlessly.
    return false;
  }

  /** Sends one FramebufferUpdateRequest (whole screen) and applies the next FramebufferUpdate. */
  async update(options: RfbUpdateOptions = {}): Promise<{ rects: RfbRect[]; frame: RfbFrame }> {
    const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_RFB_TIMEOUT_MS);
    return this.exclusive(async () => {
      this.requestUpdate(options.incremental ?? true);
      const rects = await this.readUntilUpdate(deadline, () => undefined);
      return { rects, frame: this.frame() };
    });
  }

  sendPointerEvent(x: number, y: number, buttonMask = 0): void {
    const msg = Buffer.alloc(6);
    msg[0] = 5;
    msg[1] = buttonMask;
    msg.writeUInt16BE(x, 2);
    msg.writeUInt16BE(y, 4);
    this.write(msg);
  }

  sendKeyEvent(down: boolean, keysym: number): void {
    const msg = Buffer.alloc(8);
    msg[0] = 4;
    msg[1] = down ? 1 : 0;
    msg.writeUInt32BE(keysym >>> 0, 4);
    this.write(msg);
  }

  sendClientCutText(text: string): void {
    const body = Buffer.from(text, 'latin1');
    const msg = Buffer.alloc(8);
    msg[0] = 6;
    msg.writeUInt32BE(body.length, 4);
    this.write(Buffer.concat([msg, body]));
  }

  /** Ends the connection; resolves once the stream closed (destroyed after 1 s at the latest). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.stream.destroyed) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.stream.destroy();
        resolve();
      }, 1000);
      this.stream.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.stream.end();
    });
  }

  private async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.busy) throw new Error('RfbClient: another operation is in progress');
    if (this.closed) throw new RfbError('closed', 'client is closed');
    this.busy = true;
    try {
      return await fn();
    } catch (error) {
      // After a timeout or protocol error the stream position is unknown: the client is unusable.
      this.closed = true;
      this.stream.destroy();
      throw error;
    } finally {
      this.busy = false;
    }
  }

  /** Reads server messages until one FramebufferUpdate has been applied; returns its rectangles. */
  private async readUntilUpdate(deadline: number, onResize: () => void): Promise<RfbRect[]> {
    for (;;) {
      const rects = await this.readMessage(deadline, onResize);
      if (rects) return rects;
    }
  }

  /** Reads one server message; returns the rectangles of a FramebufferUpdate, or null for other messages. */
  private readMessage(deadline: number, onResize: () => void): Promise<RfbRect[] | null> {
    return this.reader.run(this.serverMessage(onResize), deadline, 'a server message');
  }

  private *serverMessage(onResize: () => void): Reader<RfbRect[] | null> {
    const type = (yield* read(1))[0];
    switch (type) {
      case ServerMessage.FramebufferUpdate: {
        const count = yield* readUpdateHeader();
        const rects: RfbRect[] = [];
        for (let i = 0; i < count; i++) {
          const rect = yield* readRectHeader();
          yield* this.applyRect(rect, onResize);
          rects.push(rect);
        }
        return rects;
      }
      case ServerMessage.SetColourMapEntries:
        yield* skip(6 * (yield* readColourMapHeader()).count);
        return null;
      case ServerMessage.Bell:
        return null;
      case ServerMessage.ServerCutText: {
        const { bytes, extended } = yield* readCutTextHeader();
        if (extended || bytes > MAX_KEPT_CUT_TEXT_BYTES) {
          yield* skip(bytes);
          return null;
        }
        this.serverCutTexts.push((yield* read(bytes)).toString('latin1'));
        if (this.serverCutTexts.length > 16) this.serverCutTexts.shift();
        return null;
      }
      default:
        throw new RfbError('protocol', `unknown server message type ${type}`);
    }
  }

  private checkBounds(rect: RfbRect): void {
    if (rect.x + rect.width > this.fbWidth || rect.y + rect.height > this.fbHeight) {
      throw new RfbError('protocol', `rectangle ${rect.width}x${rect.height}+${rect.x}+${rect.y} outside the ${this.fbWidth}x${this.fbHeight} framebuffer`);
    }
  }

  private *applyRect(rect: RfbRect, onResize: () => void): Reader<void> {
    const { x, y, width, height } = rect;
    switch (rect.encoding) {
      case Encoding.Raw: {
        this.checkBounds(rect);
        const pixels = yield* read(width * height * 4);
        const fb = this.framebuffer;
        for (let row = 0; row < height; row++) {
          const dst = ((y + row) * this.fbWidth + x) * 4;
          pixels.copy(fb, dst, row * width * 4, (row + 1) * width * 4);
          for (let i = dst + 3, end = dst + width * 4; i < end; i += 4) fb[i] = 255;
        }
        return;
      }
      case Encoding.CopyRect: {
        this.checkBounds(rect);
        const src = yield* read(4);
        const sx = src.readUInt16BE(0);
        const sy = src.readUInt16BE(2);
        this.checkBounds({ ...rect, x: sx, y: sy });
        const stride = this.fbWidth * 4;
        const copy = Buffer.alloc(width * height * 4); // source and destination may overlap
        for (let row = 0; row < height; row++) this.framebuffer.copy(copy, row * width * 4, (sy + row) * stride + sx * 4, (sy + row) * stride + (sx + width) * 4);
        for (let row = 0; row < height; row++) copy.copy(this.framebuffer, (y + row) * stride + x * 4, row * width * 4, (row + 1) * width * 4);
        return;
      }
      case Encoding.DesktopSize: {
        if (width * height > this.maxPixels) throw new RfbError('protocol', `framebuffer ${width}x${height} exceeds ${this.maxPixels} pixels`);
        this.fbWidth = width;
        this.fbHeight = height;
        this.framebuffer = Buffer.alloc(width * height * 4);
        onResize();
        return;
      }
      default:
        throw new RfbError('protocol', `server used encoding ${rect.encoding}, which was not requested`);
    }
  }
}
