/**
 * Builders for synthetic RFB byte streams, shared by the unit tests (not exported from index.ts).
 * Kept out of *.spec.ts so several specs can use them.
 */
import { Encoding } from './encodings';
import { PixelFormat, RGBX32, encodePixelFormat } from './pixel-format';

export const u8 = (...v: number[]) => Buffer.from(v);
export function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v, 0);
  return b;
}
export function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
}
export function s32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v, 0);
  return b;
}
export const cat = (...parts: Buffer[]) => Buffer.concat(parts);

/** Deterministic pseudo-random bytes (so a failing split is reproducible). */
export function pseudoRandom(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

export function filler(n: number, seed = 7): Buffer {
  const rnd = pseudoRandom(seed);
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rnd() * 256);
  return b;
}

/** Splits `data` at random boundaries (1..maxChunk bytes). */
export function randomChunks(data: Buffer, seed: number, maxChunk = 17): Buffer[] {
  const rnd = pseudoRandom(seed);
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; ) {
    const n = 1 + Math.floor(rnd() * maxChunk);
    out.push(data.subarray(i, i + n));
    i += n;
  }
  return out;
}

export function byteChunks(data: Buffer): Buffer[] {
  return [...data].map((b) => Buffer.from([b]));
}

export const version = (minor: 3 | 7 | 8) => Buffer.from(`RFB 003.00${minor}\n`, 'latin1');

export function serverInit(width: number, height: number, name = 'test desktop', pf: PixelFormat = RGBX32): Buffer {
  const n = Buffer.from(name, 'utf8');
  return cat(u16(width), u16(height), encodePixelFormat(pf), u32(n.length), n);
}

export function rectHeader(x: number, y: number, w: number, h: number, encoding: number): Buffer {
  return cat(u16(x), u16(y), u16(w), u16(h), s32(encoding));
}

export function update(rects: Buffer[], count = rects.length): Buffer {
  return cat(u8(0, 0), u16(count), ...rects);
}

/** Tight compact length (1–3 bytes). */
export function compactLength(n: number): Buffer {
  if (n < 0x80) return u8(n);
  if (n < 0x4000) return u8((n & 0x7f) | 0x80, n >> 7);
  return u8((n & 0x7f) | 0x80, ((n >> 7) & 0x7f) | 0x80, n >> 14);
}

export const rects = {
  raw: (x: number, y: number, w: number, h: number, bpp = 4) => cat(rectHeader(x, y, w, h, Encoding.Raw), filler(w * h * bpp, x + y + w)),
  copyRect: (x: number, y: number, w: number, h: number, sx: number, sy: number) => cat(rectHeader(x, y, w, h, Encoding.CopyRect), u16(sx), u16(sy)),
  zrle: (x: number, y: number, w: number, h: number, len: number) => cat(rectHeader(x, y, w, h, Encoding.ZRLE), u32(len), filler(len, len)),
  tightFill: (x: number, y: number, w: number, h: number, tpixel = 3) => cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x80), filler(tpixel)),
  tightJpeg: (x: number, y: number, w: number, h: number, len: number) => cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x90), compactLength(len), filler(len, 3)),
  /** Basic compression, copy filter (implicit), zlib data of `len` bytes (or raw when under 12 bytes). */
  tightBasicCopy: (x: number, y: number, w: number, h: number, len: number, tpixel = 3) => {
    const raw = w * h * tpixel;
    const body = raw < 12 ? filler(raw) : cat(compactLength(len), filler(len, 9));
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x00), body);
  },
  /** Basic compression, explicit palette filter with `colours` entries. */
  tightBasicPalette: (x: number, y: number, w: number, h: number, colours: number, len: number, tpixel = 3) => {
    const data = colours === 2 ? Math.floor((w + 7) / 8) * h : w * h;
    const body = data < 12 ? filler(data) : cat(compactLength(len), filler(len, 11));
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x40 | 0x10), u8(1), u8(colours - 1), filler(colours * tpixel), body);
  },
  /** Basic compression, explicit gradient filter. */
  tightBasicGradient: (x: number, y: number, w: number, h: number, len: number, tpixel = 3) => {
    const raw = w * h * tpixel;
    const body = raw < 12 ? filler(raw) : cat(compactLength(len), filler(len, 13));
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x40 | 0x20), u8(2), body);
  },
  cursor: (x: number, y: number, w: number, h: number, bpp = 4) => cat(rectHeader(x, y, w, h, Encoding.Cursor), filler(w * h * bpp + Math.floor((w + 7) / 8) * h)),
  desktopSize: (w: number, h: number) => rectHeader(0, 0, w, h, Encoding.DesktopSize),
  lastRect: () => rectHeader(0, 0, 0, 0, Encoding.LastRect),
  extendedDesktopSize: (w: number, h: number, screens: number) => cat(rectHeader(0, 0, w, h, Encoding.ExtendedDesktopSize), u8(screens, 0, 0, 0), filler(16 * screens)),
  desktopName: (name: string) => {
    const n = Buffer.from(name, 'utf8');
    return cat(rectHeader(0, 0, 0, 0, Encoding.DesktopName), u32(n.length), n);
  },
};

export const serverMessages = {
  colourMap: (n: number) => cat(u8(1, 0), u16(0), u16(n), filler(6 * n)),
  bell: () => u8(2),
  cutText: (text: string) => {
    const t = Buffer.from(text, 'latin1');
    return cat(u8(3, 0, 0, 0), u32(t.length), t);
  },
  endOfContinuousUpdates: () => u8(150),
  fence: (flags: number, payload: Buffer = Buffer.alloc(0)) => cat(u8(248, 0, 0, 0), u32(flags), u8(payload.length), payload),
};

export const clientMessages = {
  setPixelFormat: (pf: PixelFormat) => cat(u8(0, 0, 0, 0), encodePixelFormat(pf)),
  setEncodings: (list: number[]) => cat(u8(2, 0), u16(list.length), ...list.map(s32)),
  updateRequest: (incremental: boolean, w: number, h: number) => cat(u8(3, incremental ? 1 : 0), u16(0), u16(0), u16(w), u16(h)),
  key: (down: boolean, keysym: number) => cat(u8(4, down ? 1 : 0, 0, 0), u32(keysym)),
  pointer: (mask: number, x: number, y: number) => cat(u8(5, mask), u16(x), u16(y)),
  cutText: (text: string) => {
    const t = Buffer.from(text, 'latin1');
    return cat(u8(6, 0, 0, 0), u32(t.length), t);
  },
  qemuKey: (down: boolean, keysym: number, keycode: number) => cat(u8(255, 0), u16(down ? 1 : 0), u32(keysym), u32(keycode)),
  enableContinuousUpdates: (enable: boolean, w: number, h: number) => cat(u8(150, enable ? 1 : 0), u16(0), u16(0), u16(w), u16(h)),
  fence: (flags: number, payload: Buffer = Buffer.alloc(0)) => cat(u8(248, 0, 0, 0), u32(flags), u8(payload.length), payload),
  setDesktopSize: (w: number, h: number, screens: number) => cat(u8(251, 0), u16(w), u16(h), u8(screens, 0), filler(16 * screens)),
};
