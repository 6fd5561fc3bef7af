/**
 * Incremental, two-direction RFB (RFC 6143) stream tracker for a transparent proxy.
 *
 * It follows the handshake (ProtocolVersion, security negotiation, VNC auth, ClientInit, ServerInit) and then
 * every message in both directions, without decoding pixels. Bytes arrive in arbitrary fragments (down to one
 * byte); the StreamFeeder reassembles what each step needs.
 *
 * What it changes on the wire, and why:
 *  - server→client security-type list: reduced to None (1) and VNC Authentication (2), the only types whose
 *    exchange the proxy can follow (VeNCrypt/TLS, RA2... would make the rest of the stream opaque). With no
 *    type left the client gets a proper "no security types" failure with a reason string.
 *  - client→server SetEncodings: reduced to encodings the server→client parser can size (encodings.ts).
 *  - client→server KeyEvent / PointerEvent / ClientCutText / QEMU key / SetDesktopSize: dropped in view-only.
 *  - client→server ClientCutText: dropped when clipboardUp is off; server→client ServerCutText: cut out of the
 *    stream when clipboardDown is off. Extended-clipboard forms (a length with the top bit set) from the client
 *    are always dropped: SetEncodings never lets the extension through, so the server would misread them.
 * Everything else is forwarded byte for byte. After ServerInit the server→client direction is forwarded the
 * moment each chunk arrives (before it is parsed) unless messages must be cut out of it (clipboardDown off):
 * then each chunk is forwarded in runs as it is parsed, minus the cut messages, in the same synchronous call.
 * The handshake messages before ServerInit are forwarded message by message (a handful of bytes) because the
 * security list may need rewriting.
 */
import { RfbError } from './errors';
import { Encoding, PIXEL_ENCODINGS, proxySupportsEncoding } from './encodings';
import { Need, ParserGenerator, StreamFeeder, filter, forward, pass, passthrough, read, skip, waitUntil } from './feeder';
import { PixelFormat, bytesPerPixel, compactPixelSize, isValidBpp, parsePixelFormat } from './pixel-format';
import {
  RfbMinorVersion,
  SECURITY_NONE,
  SECURITY_VNC_AUTH,
  ServerMessage,
  flowForVersion,
  parseProtocolVersion,
  protocolError,
  readColourMapHeader,
  readCutTextHeader,
  readFence,
  ClientMessage,
  readDesktopName,
  readReasonString,
  readRectHeader,
  readServerInit,
  readTightData,
  readTightHead,
  readUpdateHeader,
} from './rfb-messages';

export type InputKind = 'key' | 'pointer' | 'clipboard' | 'resize';
export type ServerMessageKind = 'colourmap' | 'bell' | 'cuttext' | 'end_of_continuous_updates' | 'fence';

export interface UpdateRequestInfo {
  incremental: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
  /** Arrival time (performance.now()) of the chunk holding the request's first byte. */
  at: number;
}

export interface RectInfo {
  x: number;
  y: number;
  width: number;
  height: number;
  encoding: number;
  /** Header (12) + payload bytes. */
  bytes: number;
  /** Wall time between the arrival of the rect header's first byte and of the payload's last byte. */
  timeMs: number;
}

export interface UpdateInfo {
  /** Arrival time of the FramebufferUpdate message-type byte. */
  firstByteAt: number;
  /** Arrival time of the last byte of the last rectangle. */
  lastByteAt: number;
  rects: number;
  /** Sum of width*height over pixel-carrying rects (Raw, CopyRect, Tight, ZRLE). */
  pixelArea: number;
  bytes: number;
}

export interface ServerInitInfo {
  width: number;
  height: number;
  pixelFormat: PixelFormat;
  name: string;
}

/** Observation hooks; all optional and called synchronously while parsing. */
export interface RfbTrackerEvents {
  onServerInit?(info: ServerInitInfo): void;
  onResize?(width: number, height: number): void;
  onSecurityFailure?(reason: string): void;
  onEncodings?(requested: number[], kept: number[]): void;
  /** A client SetPixelFormat: its raw 16-byte PIXEL_FORMAT (a view of the read buffer: copy to keep it). */
  onSetPixelFormat?(raw: Buffer): void;
  onUpdateRequest?(request: UpdateRequestInfo): void;
  onUpdateStart?(firstByteAt: number): void;
  onRect?(rect: RectInfo): void;
  onUpdateEnd?(update: UpdateInfo): void;
  onInput?(kind: InputKind, forwarded: boolean): void;
  /** A PointerEvent forwarded to the server: where the browser's pointer is. */
  onPointer?(x: number, y: number): void;
  /** A server message other than FramebufferUpdate; `forwarded` is false when it was cut out of the stream. */
  onServerMessage?(kind: ServerMessageKind, bytes: number, forwarded: boolean): void;
}

export interface RfbTrackerOptions {
  /** Drop KeyEvent, PointerEvent, ClientCutText, QEMU key events and SetDesktopSize instead of forwarding them. */
  viewOnly: boolean;
  /** Forward ClientCutText to the server (default true; view-only drops it regardless). */
  clipboardUp?: boolean;
  /**
   * Forward ServerCutText to the browser (default true). When false the server stream is filtered at message
   * boundaries instead of passed through whole chunks (a little parsing cost per chunk; none when true).
   */
  clipboardDown?: boolean;
  /** Bytes to write to the VNC server (after rewriting/dropping). */
  toServer(chunk: Buffer): void;
  /** Bytes to send to the browser. */
  toClient(chunk: Buffer): void;
  /** The stream cannot be followed any more (the caller must close both sides). */
  onError(error: RfbError, direction: 'client' | 'server'): void;
  /**
   * Both sides already finished version and security negotiation elsewhere (the gateway authenticates to
   * the VNC server itself and offers the browser security None): the streams start at ClientInit/ServerInit.
   */
  preAuthenticated?: boolean;
  events?: RfbTrackerEvents;
  now?: () => number;
}

/** What the tracker has learnt about the session so far. */
export class RfbProtocolState {
  serverVersion?: string;
  clientVersion?: string;
  /** Negotiated protocol flow (the client's reply decides it). */
  minor?: RfbMinorVersion;
  /** Security types offered to the client after filtering (3.7+). */
  offeredSecurity?: number[];
  securityType?: number;
  securityFailure?: string;
  clientInitDone = false;
  serverInitDone = false;
  name = '';
  width = 0;
  height = 0;
  /** Pixel format the server currently encodes with (ServerInit, then the client's SetPixelFormat). */
  pixelFormat?: PixelFormat;
  /** A SetPixelFormat seen on the way in, applied at the next server message boundary. */
  pendingPixelFormat?: PixelFormat;
  /** Encodings of the last (rewritten) SetEncodings. */
  encodings: number[] = [];
  /** Every encoding ever negotiated in this session (an update encoded before a later SetEncodings stays valid). */
  readonly everNegotiated = new Set<number>([Encoding.Raw]);
}

function failureMessage(minor: RfbMinorVersion, reason: string): Buffer {
  const text = Buffer.from(reason, 'utf8');
  const head = minor === 3 ? Buffer.alloc(4) : Buffer.alloc(1); // 3.3: u32 0; 3.7+: u8 count 0
  const len = Buffer.alloc(4);
  len.writeUInt32BE(text.length, 0);
  return Buffer.concat([head, len, text]);
}

export class RfbProtocolTracker {
  readonly state = new RfbProtocolState();
  private readonly server: StreamFeeder;
  private readonly client: StreamFeeder;
  private readonly events: RfbTrackerEvents;
  private readonly now: () => number;

  constructor(private readonly options: RfbTrackerOptions) {
    this.events = options.events ?? {};
    this.now = options.now ?? (() => performance.now());
    // Handshake messages are emitted explicitly by the generators; after ServerInit the server feeder
    // switches to passthrough and forwards whole chunks through `toClient` itself.
    this.server = new StreamFeeder(this.serverStream(), (chunk) => this.options.toClient(chunk), (e) => this.fail(e, 'server'), this.now);
    this.client = new StreamFeeder(this.clientStream(), (chunk) => this.options.toServer(chunk), (e) => this.fail(e, 'client'), this.now);
  }

  /** Bytes received from the browser. */
  pushFromClient(chunk: Buffer): void {
    this.client.push(chunk);
    this.crossPoke();
  }

  /** Bytes received from the VNC server. */
  pushFromServer(chunk: Buffer): void {
    this.server.push(chunk);
    this.crossPoke();
  }

  /**
   * Handshake steps of one direction can wait on state learnt from the other (e.g. a pipelined security
   * choice waits for the server's list, and the server side then waits for that choice): re-run both until
   * neither makes progress. Only the handshake has such waits, so this ends after a few rounds, and once
   * both Init messages have passed it is skipped (it would cost every streamed chunk two idle pumps).
   */
  private crossPoke(): void {
    if (this.state.clientInitDone && this.state.serverInitDone) return;
    for (let round = 0; round < 16; round++) {
      const before = this.client.progress + this.server.progress;
      this.server.poke();
      this.client.poke();
      if (this.client.progress + this.server.progress === before) return;
    }
  }

  get failed(): boolean {
    return this.server.failed !== undefined || this.client.failed !== undefined;
  }

  private fail(error: Error, direction: 'client' | 'server'): void {
    const rfbError = error instanceof RfbError ? error : protocolError(error.message);
    this.options.onError(rfbError, direction);
  }

  // ---------------------------------------------------------------- server → client

  private *serverStream(): ParserGenerator {
    const s = this.state;
    if (this.options.preAuthenticated) {
      s.minor = 8;
      s.securityType = SECURITY_NONE;
    } else {
      const handshake = yield* this.serverHandshake();
      if (!handshake) return;
    }
    yield* this.serverMessages();
  }

  /** Version and security from the server; false when security failed (the failure was forwarded). */
  private *serverHandshake(): Generator<Need, boolean, Buffer | undefined> {
    const s = this.state;
    const version = yield* read(12);
    const parsed = parseProtocolVersion(version);
    flowForVersion(parsed.major, parsed.minor); // validates
    s.serverVersion = parsed.text;
    this.options.toClient(version);
    yield* waitUntil(() => s.minor !== undefined);
    const minor = s.minor as RfbMinorVersion;

    if (minor === 3) {
      const typeBuf = yield* read(4);
      const type = typeBuf.readUInt32BE(0);
      if (type === 0) {
        const reason = yield* readReasonString();
        this.options.toClient(Buffer.concat([typeBuf, reason.raw]));
        this.securityFailed(reason.text);
        return false;
      }
      if (type !== SECURITY_NONE && type !== SECURITY_VNC_AUTH) {
        this.options.toClient(failureMessage(3, `security type ${type} is not supported by the stream proxy`));
        throw new RfbError('unsupported_security', `server chose security type ${type}`);
      }
      s.securityType = type;
      this.options.toClient(typeBuf);
    } else {
      const count = (yield* read(1))[0];
      if (count === 0) {
        const reason = yield* readReasonString();
        this.options.toClient(Buffer.concat([Buffer.from([0]), reason.raw]));
        this.securityFailed(reason.text);
        return false;
      }
      const types = [...(yield* read(count))];
      const kept = types.filter((t) => t === SECURITY_NONE || t === SECURITY_VNC_AUTH);
      if (kept.length === 0) {
        this.options.toClient(failureMessage(minor, `no security type supported by the stream proxy (server offers ${types.join(', ')})`));
        throw new RfbError('unsupported_security', `server offers only security types ${types.join(', ')}`);
      }
      s.offeredSecurity = kept;
      this.options.toClient(Buffer.from([kept.length, ...kept]));
      yield* waitUntil(() => s.securityType !== undefined);
    }

    if (s.securityType === SECURITY_VNC_AUTH) this.options.toClient(yield* read(16)); // challenge
    if (minor === 8 || s.securityType === SECURITY_VNC_AUTH) {
      const result = yield* read(4);
      const status = result.readUInt32BE(0);
      if (status !== 0) {
        let reason = 'authentication failed';
        if (minor === 8) {
          const r = yield* readReasonString();
          reason = r.text || reason;
          this.options.toClient(Buffer.concat([result, r.raw]));
        } else {
          this.options.toClient(result);
        }
        this.securityFailed(reason);
        return false;
      }
      this.options.toClient(result);
    }

    return true;
  }

  /** ServerInit, then server messages until the stream ends. */
  private *serverMessages(): ParserGenerator {
    const s = this.state;
    const init = yield* readServerInit();
    const pixelFormat = init.pixelFormat;
    s.width = init.width;
    s.height = init.height;
    s.pixelFormat = pixelFormat;
    s.name = init.name;
    s.serverInitDone = true;
    this.options.toClient(init.raw);
    this.events.onServerInit?.({ width: s.width, height: s.height, pixelFormat, name: s.name });
    const filtered = this.options.clipboardDown === false;
    yield* (filtered ? filter() : passthrough());

    for (;;) {
      // Filtered: each message's type byte is held until the type says whether the message goes.
      if (filtered) yield* forward('hold');
      const type = (yield* read(1))[0];
      if (filtered) yield* forward(type === ServerMessage.ServerCutText ? 'drop' : 'emit');
      const messageStart = this.server.firstByteAt;
      if (s.pendingPixelFormat) {
        s.pixelFormat = s.pendingPixelFormat;
        s.pendingPixelFormat = undefined;
      }
      switch (type) {
        case ServerMessage.FramebufferUpdate:
          yield* this.framebufferUpdate(messageStart);
          break;
        case ServerMessage.SetColourMapEntries: {
          const colours = (yield* readColourMapHeader()).count;
          yield* skip(colours * 6);
          this.events.onServerMessage?.('colourmap', 6 + colours * 6, true);
          break;
        }
        case ServerMessage.Bell:
          this.events.onServerMessage?.('bell', 1, true);
          break;
        case ServerMessage.ServerCutText: {
          const { bytes, extended } = yield* readCutTextHeader();
          // Passed through, an extended message has already reached the browser and cannot be taken back.
          if (extended && !filtered) throw protocolError('extended clipboard message, but the extension was not negotiated');
          yield* skip(bytes);
          this.events.onServerMessage?.('cuttext', 8 + bytes, !filtered);
          break;
        }
        // The server's answer to a client that asked for continuous updates (it sends updates without requests
        // from then on), and fences (ordering marks its congestion control measures the path with).
        case ServerMessage.EndOfContinuousUpdates:
          if (!s.everNegotiated.has(Encoding.ContinuousUpdates)) throw protocolError('EndOfContinuousUpdates, but continuous updates were not negotiated');
          this.events.onServerMessage?.('end_of_continuous_updates', 1, true);
          break;
        case ServerMessage.Fence: {
          if (!s.everNegotiated.has(Encoding.Fence)) throw protocolError('Fence, but fences were not negotiated');
          const fence = yield* readFence();
          this.events.onServerMessage?.('fence', 1 + fence.length, true);
          break;
        }
        default:
          throw protocolError(`unknown server message type ${type}`);
      }
    }
  }

  private securityFailed(reason: string): void {
    this.state.securityFailure = reason;
    this.events.onSecurityFailure?.(reason);
  }

  private resize(width: number, height: number): void {
    this.state.width = width;
    this.state.height = height;
    this.events.onResize?.(width, height);
  }

  private *framebufferUpdate(messageStart: number): ParserGenerator {
    const s = this.state;
    const count = yield* readUpdateHeader();
    this.events.onUpdateStart?.(messageStart);
    // 0xFFFF with LastRect negotiated means "until a LastRect rectangle".
    const open = count === 0xffff && s.everNegotiated.has(Encoding.LastRect);
    let rects = 0;
    let pixelArea = 0;
    let bytes = 4;
    for (let i = 0; open || i < count; i++) {
      const { x, y, width, height, encoding } = yield* readRectHeader();
      const rectStart = this.server.firstByteAt;
      if (!s.everNegotiated.has(encoding)) throw protocolError(`server used encoding ${encoding}, which was not negotiated`);
      const pf = s.pixelFormat as PixelFormat;
      let payload = 0;
      let last = false;
      switch (encoding) {
        case Encoding.Raw:
          payload = width * height * bytesPerPixel(pf);
          yield* skip(payload);
          break;
        case Encoding.CopyRect:
          payload = 4;
          yield* skip(4);
          break;
        case Encoding.Tight:
          payload = yield* this.tightRect(width, height, pf);
          break;
        case Encoding.ZRLE: {
          const length = (yield* read(4)).readUInt32BE(0);
          yield* skip(length);
          payload = 4 + length;
          break;
        }
        case Encoding.DesktopSize:
          this.resize(width, height);
          break;
        case Encoding.LastRect:
          last = true;
          break;
        case Encoding.PointerPos:
        case Encoding.QemuExtendedKeyEvent:
          break;
        case Encoding.Cursor:
          payload = width * height * bytesPerPixel(pf) + Math.floor((width + 7) / 8) * height;
          yield* skip(payload);
          break;
        case Encoding.XCursor:
          payload = width * height > 0 ? 6 + 2 * Math.floor((width + 7) / 8) * height : 0;
          yield* skip(payload);
          break;
        case Encoding.QemuLedState:
          payload = 1;
          yield* skip(1);
          break;
        case Encoding.DesktopName: {
          const desktopName = yield* readDesktopName();
          s.name = desktopName.name;
          payload = desktopName.bytes;
          break;
        }
        case Encoding.ExtendedDesktopSize: {
          const screens = (yield* read(4))[0]; // number-of-screens, 3 padding
          yield* skip(16 * screens);
          payload = 4 + 16 * screens;
          // y = status: 0 for a successful (or server-initiated) change; x = reason.
          if (y === 0) this.resize(width, height);
          break;
        }
        default:
          throw protocolError(`server used encoding ${encoding}, which the proxy cannot parse`);
      }
      if (PIXEL_ENCODINGS.has(encoding)) pixelArea += width * height;
      rects++;
      bytes += 12 + payload;
      this.events.onRect?.({ x, y, width, height, encoding, bytes: 12 + payload, timeMs: this.server.lastByteAt - rectStart });
      if (last) break;
    }
    this.events.onUpdateEnd?.({ firstByteAt: messageStart, lastByteAt: this.server.lastByteAt, rects, pixelArea, bytes });
  }

  /** Sizes a Tight rectangle without decoding it (see readTightHead); returns its payload bytes. */
  private *tightRect(width: number, height: number, pf: PixelFormat): Generator<Need, number, Buffer | undefined> {
    const tpixel = compactPixelSize(pf);
    const head = yield* readTightHead(width, height, tpixel);
    if (head.kind === 'fill') {
      yield* skip(tpixel);
      return head.bytes + tpixel;
    }
    if (head.kind === 'jpeg') {
      yield* skip(head.length);
      return head.bytes + head.length;
    }
    const palette = head.colours * tpixel;
    yield* skip(palette);
    const data = yield* readTightData(head.dataSize);
    yield* skip(data.length);
    return head.bytes + palette + data.bytes + data.length;
  }

  // ---------------------------------------------------------------- client → server

  /** Forwards an input message unless the session is view-only; answers whether it was forwarded. */
  private input(kind: InputKind, message: Buffer[]): boolean {
    if (this.options.viewOnly) {
      this.events.onInput?.(kind, false);
      return false;
    }
    this.options.toServer(Buffer.concat(message));
    this.events.onInput?.(kind, true);
    return true;
  }

  private *clientStream(): ParserGenerator {
    const s = this.state;
    if (!this.options.preAuthenticated) {
      const version = yield* read(12);
      const parsed = parseProtocolVersion(version);
      s.clientVersion = parsed.text;
      s.minor = flowForVersion(parsed.major, parsed.minor);
      this.options.toServer(version);

      if (s.minor >= 7) {
        yield* waitUntil(() => s.offeredSecurity !== undefined);
        const choice = yield* read(1);
        if (!(s.offeredSecurity as number[]).includes(choice[0])) throw protocolError(`client chose security type ${choice[0]}, which was not offered`);
        s.securityType = choice[0];
        this.options.toServer(choice);
      } else {
        yield* waitUntil(() => s.securityType !== undefined);
      }
      if (s.securityType === SECURITY_VNC_AUTH) this.options.toServer(yield* read(16)); // DES response
    }
    const clientInit = yield* read(1);
    s.clientInitDone = true;
    this.options.toServer(clientInit);

    for (;;) {
      const type = yield* read(1);
      const at = this.client.firstByteAt;
      switch (type[0]) {
        case 0: {
          const body = yield* read(19); // 3 padding + PIXEL_FORMAT
          const pf = parsePixelFormat(body, 3);
          if (!isValidBpp(pf.bitsPerPixel)) throw protocolError(`SetPixelFormat with ${pf.bitsPerPixel} bits per pixel`);
          s.pendingPixelFormat = pf;
          this.options.toServer(Buffer.concat([type, body]));
          this.events.onSetPixelFormat?.(body.subarray(3, 19));
          break;
        }
        case 2: {
          const head = yield* read(3); // padding, u16 count
          const count = head.readUInt16BE(1);
          const list = yield* read(4 * count);
          const requested: number[] = [];
          for (let i = 0; i < count; i++) requested.push(list.readInt32BE(4 * i));
          const kept = requested.filter(proxySupportsEncoding);
          const out = Buffer.alloc(4 + 4 * kept.length);
          out[0] = 2;
          out.writeUInt16BE(kept.length, 2);
          kept.forEach((e, i) => out.writeInt32BE(e, 4 + 4 * i));
          s.encodings = kept;
          for (const e of kept) s.everNegotiated.add(e);
          this.options.toServer(out);
          this.events.onEncodings?.(requested, kept);
          break;
        }
        case 3: {
          const body = yield* read(9);
          this.events.onUpdateRequest?.({
            incremental: body[0] !== 0,
            x: body.readUInt16BE(1),
            y: body.readUInt16BE(3),
            width: body.readUInt16BE(5),
            height: body.readUInt16BE(7),
            at,
          });
          this.options.toServer(Buffer.concat([type, body]));
          break;
        }
        case 4:
          this.input('key', [type, yield* read(7)]);
          break;
        case 5: {
          const body = yield* read(5);
          const forwarded = this.input('pointer', [type, body]);
          if (forwarded) this.events.onPointer?.(body.readUInt16BE(1), body.readUInt16BE(3));
          break;
        }
        case 6: {
          const { bytes, extended, raw: head } = yield* readCutTextHeader();
          // Extended forms (caps, request, peek, notify, provide) are never negotiated through the proxy: dropped.
          if (extended || this.options.viewOnly || this.options.clipboardUp === false) {
            yield* skip(bytes);
            this.events.onInput?.('clipboard', false);
          } else {
            this.options.toServer(Buffer.concat([type, head]));
            yield* pass(bytes); // streamed, not buffered
            this.events.onInput?.('clipboard', true);
          }
          break;
        }
        case 251: {
          // SetDesktopSize (ExtendedDesktopSize): padding, w, h, number-of-screens, padding, 16 per screen
          const head = yield* read(7);
          const screens = yield* read(16 * head[5]);
          this.input('resize', [type, head, screens]);
          break;
        }
        case ClientMessage.EnableContinuousUpdates: {
          // u8 enable, u16 x, y, width, height: how this browser wants its updates (not input: a joiner sends it too).
          if (!s.everNegotiated.has(Encoding.ContinuousUpdates)) throw protocolError('EnableContinuousUpdates, but continuous updates were not negotiated');
          this.options.toServer(Buffer.concat([type, yield* read(9)]));
          break;
        }
        case ClientMessage.Fence: {
          if (!s.everNegotiated.has(Encoding.Fence)) throw protocolError('Fence, but fences were not negotiated');
          this.options.toServer(Buffer.concat([type, yield* readFence()]));
          break;
        }
        case 255: {
          const subtype = yield* read(1);
          if (subtype[0] !== 0) throw protocolError(`unsupported QEMU client message subtype ${subtype[0]}`);
          this.input('key', [type, subtype, yield* read(10)]); // QEMU extended key event
          break;
        }
        default:
          throw protocolError(`unknown client message type ${type[0]}`);
      }
    }
  }
}
