/**
 * The RFB (RFC 6143) message readers every reader of the protocol here shares: the proxy's tracker
 * (rfb-parser.ts), the client and its handshake (rfb-client.ts, rfb-handshake.ts) and the recording replay
 * (@ws/recordings). Each is a generator run by a StreamFeeder (directly, or awaited through a ParserRunner); each
 * checks the sizes it reads and throws RfbError('protocol'). Payloads a caller may only size are left unread, so
 * the proxy skips them while the replay reads them.
 */
import { RfbError } from './errors';
import { Need, read } from './feeder';
import { PixelFormat, isValidBpp, parsePixelFormat } from './pixel-format';

export const SECURITY_NONE = 1;
export const SECURITY_VNC_AUTH = 2;
const MAX_REASON_BYTES = 64 * 1024;
const MAX_NAME_BYTES = 1024 * 1024;
const EXTENDED_CUT_TEXT = 0x80000000;
/** Tight data shorter than this is sent as is, without zlib (Tight spec). */
const TIGHT_MIN_TO_COMPRESS = 12;

export const ServerMessage = { FramebufferUpdate: 0, SetColourMapEntries: 1, Bell: 2, ServerCutText: 3, EndOfContinuousUpdates: 150, Fence: 248 } as const;
/** Client message types beyond RFC 6143's core that the gateway follows (the community registry's numbers). */
export const ClientMessage = { EnableContinuousUpdates: 150, Fence: 248 } as const;
/** The most a Fence may carry (the registry's limit). */
const MAX_FENCE_PAYLOAD = 64;

type Reader<T> = Generator<Need, T, Buffer | undefined>;

export function protocolError(message: string): RfbError {
  return new RfbError('protocol', message);
}

export type RfbMinorVersion = 3 | 7 | 8;

/** Maps a ProtocolVersion string to the flow it selects (RFC 6143 §7.1.1: unknown 3.x is treated as 3.3). */
export function parseProtocolVersion(buf: Buffer): { text: string; major: number; minor: number } {
  const text = buf.toString('latin1');
  const match = /^RFB (\d{3})\.(\d{3})\n$/.exec(text);
  if (!match) throw protocolError(`invalid ProtocolVersion ${JSON.stringify(text)}`);
  return { text: text.trim(), major: Number(match[1]), minor: Number(match[2]) };
}

export function flowForVersion(major: number, minor: number): RfbMinorVersion {
  if (major > 3) return 8; // RealVNC 4.x/5.x and Intel AMT speak the 3.8 flow
  if (major < 3) throw protocolError(`unsupported protocol version ${major}.${minor}`);
  return minor >= 8 ? 8 : minor === 7 ? 7 : 3;
}

/** A security failure's reason: `raw` is the message as received (u32 length + text), for a proxy to forward. */
export function* readReasonString(): Reader<{ text: string; raw: Buffer }> {
  const length = yield* read(4);
  const n = length.readUInt32BE(0);
  if (n > MAX_REASON_BYTES) throw protocolError(`reason string of ${n} bytes`);
  const text = yield* read(n);
  return { text: text.toString('utf8'), raw: Buffer.concat([length, text]) };
}

export interface ServerInit {
  width: number;
  height: number;
  pixelFormat: PixelFormat;
  name: string;
  /** The message as received. */
  raw: Buffer;
}

export function* readServerInit(): Reader<ServerInit> {
  const init = yield* read(24);
  const nameLength = init.readUInt32BE(20);
  if (nameLength > MAX_NAME_BYTES) throw protocolError(`ServerInit desktop name of ${nameLength} bytes`);
  const name = yield* read(nameLength);
  const pixelFormat = parsePixelFormat(init, 4);
  if (!isValidBpp(pixelFormat.bitsPerPixel)) throw protocolError(`server pixel format has ${pixelFormat.bitsPerPixel} bits per pixel`);
  return { width: init.readUInt16BE(0), height: init.readUInt16BE(2), pixelFormat, name: name.toString('utf8'), raw: Buffer.concat([init, name]) };
}

/** The body of a FramebufferUpdate's header (after the type byte): its rectangle count. */
export function* readUpdateHeader(): Reader<number> {
  return (yield* read(3)).readUInt16BE(1); // padding, u16 count
}

export interface RectHeader {
  x: number;
  y: number;
  width: number;
  height: number;
  encoding: number;
}

export function* readRectHeader(): Reader<RectHeader> {
  const h = yield* read(12);
  return { x: h.readUInt16BE(0), y: h.readUInt16BE(2), width: h.readUInt16BE(4), height: h.readUInt16BE(6), encoding: h.readInt32BE(8) };
}

/** SetColourMapEntries after its type byte, up to its entries (6 bytes each, left unread). */
export function* readColourMapHeader(): Reader<{ first: number; count: number }> {
  const head = yield* read(5); // padding, u16 first colour, u16 number of colours
  return { first: head.readUInt16BE(1), count: head.readUInt16BE(3) };
}

/**
 * A cut-text message (ServerCutText or ClientCutText) after its type byte, up to its text (left unread): `bytes`
 * long; `extended` for the extended clipboard's form (a negative s32 length). `raw` is the header as received.
 */
export function* readCutTextHeader(): Reader<{ bytes: number; extended: boolean; raw: Buffer }> {
  const raw = yield* read(7); // 3 padding, u32 length
  const length = raw.readUInt32BE(3);
  return length >= EXTENDED_CUT_TEXT ? { bytes: 0x100000000 - length, extended: true, raw } : { bytes: length, extended: false, raw };
}

/**
 * A Fence message (either direction) after its type byte: 3 padding, u32 flags, u8 length, payload (≤ 64 bytes),
 * read whole. A fence orders the stream around it; whoever relays it in order keeps its meaning.
 */
export function* readFence(): Reader<Buffer> {
  const head = yield* read(8);
  const length = head[7];
  if (length > MAX_FENCE_PAYLOAD) throw protocolError(`fence with a ${length}-byte payload (at most ${MAX_FENCE_PAYLOAD})`);
  return length === 0 ? head : Buffer.concat([head, yield* read(length)]);
}

/** The DesktopName pseudo-encoding's payload; `bytes` is its size on the wire. */
export function* readDesktopName(): Reader<{ name: string; bytes: number }> {
  const length = (yield* read(4)).readUInt32BE(0);
  if (length > MAX_NAME_BYTES) throw protocolError(`desktop name of ${length} bytes`);
  return { name: (yield* read(length)).toString('utf8'), bytes: 4 + length };
}

/** Tight "compact length": 1–3 bytes, 7 + 7 + 8 bits. Returns [length, bytes used]. */
export function* readCompactLength(): Reader<[number, number]> {
  const b0 = (yield* read(1))[0];
  let length = b0 & 0x7f;
  if (!(b0 & 0x80)) return [length, 1];
  const b1 = (yield* read(1))[0];
  length |= (b1 & 0x7f) << 7;
  if (!(b1 & 0x80)) return [length, 2];
  return [length + (yield* read(1))[0] * 16384, 3];
}

export const TightFilter = { Copy: 0, Palette: 1, Gradient: 2 } as const;

/**
 * A Tight rectangle up to its pixel data (TightVNC spec / rfbproto "Tight Encoding"). `control` is the
 * compression-control byte (its low nibble resets zlib streams); `bytes` what was read. 'fill': one TPIXEL
 * follows. 'jpeg': `length` bytes of JPEG follow. 'basic': `colours` palette TPIXELs (0 without the palette
 * filter), then the filtered data of `dataSize` bytes (see readTightData), from zlib stream `stream`.
 */
export type TightHead =
  | { kind: 'fill'; control: number; bytes: number }
  | { kind: 'jpeg'; control: number; bytes: number; length: number }
  | { kind: 'basic'; control: number; bytes: number; stream: 0 | 1 | 2 | 3; filter: number; colours: number; dataSize: number };

/** `tpixel`: the TPIXEL size of the pixel format (compactPixelSize). */
export function* readTightHead(width: number, height: number, tpixel: number): Reader<TightHead> {
  const control = (yield* read(1))[0];
  const kind = control >> 4;
  if (kind === 0x08) return { kind: 'fill', control, bytes: 1 };
  if (kind === 0x09) {
    const [length, used] = yield* readCompactLength();
    return { kind: 'jpeg', control, bytes: 1 + used, length };
  }
  if (kind & 0x08) throw protocolError(`Tight compression control 0x${control.toString(16)} (TightPNG or invalid)`);
  const stream = (kind & 0x03) as 0 | 1 | 2 | 3;
  const filter = kind & 0x04 ? (yield* read(1))[0] : TightFilter.Copy;
  const bytes = kind & 0x04 ? 2 : 1;
  switch (filter) {
    case TightFilter.Copy:
    case TightFilter.Gradient:
      return { kind: 'basic', control, bytes, stream, filter, colours: 0, dataSize: width * height * tpixel };
    case TightFilter.Palette: {
      const colours = (yield* read(1))[0] + 1;
      // Two colours: 1 bit per pixel, rows padded to bytes; more: one byte per pixel.
      const dataSize = colours === 2 ? Math.floor((width + 7) / 8) * height : width * height;
      return { kind: 'basic', control, bytes: bytes + 1, stream, filter, colours, dataSize };
    }
    default:
      throw protocolError(`Tight filter ${filter}`);
  }
}

/**
 * Where a basic Tight rectangle's filtered data of `dataSize` bytes is: `length` bytes follow, zlib data when
 * `compressed` (short data is sent as is); `bytes` is the size of the compact length read (0 when none).
 */
export function* readTightData(dataSize: number): Reader<{ length: number; compressed: boolean; bytes: number }> {
  if (dataSize < TIGHT_MIN_TO_COMPRESS) return { length: dataSize, compressed: false, bytes: 0 };
  const [length, bytes] = yield* readCompactLength();
  return { length, compressed: true, bytes };
}
