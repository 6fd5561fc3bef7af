/**
 * Encoders for synthetic RFB server streams with known pixels, shared by the replay and conversion tests (not
 * exported from index.ts). Each encoder follows the encoding's specification independently of the decoder.
 */
import { Z_SYNC_FLUSH, createDeflate } from 'node:zlib';
import { encode as encodeJpeg } from 'jpeg-js';
import { Encoding, PixelFormat, encodePixelFormat, cat, compactLength, rectHeader, serverInit as rfbServerInit, u16, u32, u8 } from '@ws/stream';
// The byte builders are libs/stream's own test helpers: one copy of the RFB wire primitives.
import { CAPTURE_MAGIC, CaptureRecordKind, encodeCaptureRecord } from '../capture-format';

export { cat, compactLength, rectHeader, u16, u32, u8, update } from '@ws/stream';

export function format(bitsPerPixel: number, depth: number, bigEndian: boolean, max: [number, number, number], shift: [number, number, number], trueColour = true): PixelFormat {
  return { bitsPerPixel, depth, bigEndian, trueColour, redMax: max[0], greenMax: max[1], blueMax: max[2], redShift: shift[0], greenShift: shift[1], blueShift: shift[2] };
}

export const FORMATS = {
  rgbx32: format(32, 24, false, [255, 255, 255], [0, 8, 16]),
  bgrx32be: format(32, 24, true, [255, 255, 255], [16, 8, 0]),
  xrgb32be: format(32, 24, true, [255, 255, 255], [0, 8, 16]),
  rgb565: format(16, 16, false, [31, 63, 31], [11, 5, 0]),
  rgb565be: format(16, 16, true, [31, 63, 31], [11, 5, 0]),
  bgr233: format(8, 8, false, [7, 7, 3], [0, 3, 6]),
  /** 10-bit channels in a 32 bpp word: no compact 3-byte pixel. */
  rgb30: format(32, 30, false, [1023, 1023, 1023], [20, 10, 0]),
  /** Channels in the 3 high bytes, little-endian: ZRLE's CPIXEL is wire bytes 1..3. */
  high24le: format(32, 24, false, [255, 255, 255], [8, 16, 24]),
} satisfies Record<string, PixelFormat>;

/** An image as colour components within a pixel format's maxima (so every value is exactly representable). */
export interface Picture {
  width: number;
  height: number;
  /** r, g, b per pixel, each 0..max of its channel. */
  comps: Uint16Array;
}

/** A picture from an 8-bit RGB function, quantised to the format's channels. */
export function picture(width: number, height: number, pf: PixelFormat, rgb: (x: number, y: number) => [number, number, number]): Picture {
  const comps = new Uint16Array(width * height * 3);
  const max = [pf.redMax, pf.greenMax, pf.blueMax];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const c = rgb(x, y);
      for (let i = 0; i < 3; i++) comps[(y * width + x) * 3 + i] = Math.round((c[i] * max[i]) / 255);
    }
  }
  return { width, height, comps };
}

/** A busy deterministic pattern (gradients and a checkerboard), with few enough colours here and there for palettes. */
export const busy = (seed = 0) => (x: number, y: number): [number, number, number] => [(x * 7 + seed * 31) & 255, (y * 5 + x * 3) & 255, ((x ^ y) * 11 + seed) & 255];

/** The RGBA bytes a client shows for the picture. */
export function expectedRgba(pic: Picture, pf: PixelFormat): Buffer {
  const out = Buffer.alloc(pic.width * pic.height * 4);
  const max = [pf.redMax, pf.greenMax, pf.blueMax];
  for (let i = 0; i < pic.width * pic.height; i++) {
    for (let c = 0; c < 3; c++) out[i * 4 + c] = Math.round((pic.comps[i * 3 + c] * 255) / max[c]);
    out[i * 4 + 3] = 255;
  }
  return out;
}

export function pixelValue(pf: PixelFormat, r: number, g: number, b: number): number {
  return ((r << pf.redShift) | (g << pf.greenShift) | (b << pf.blueShift)) >>> 0;
}

/** A PIXEL on the wire. */
export function encodePixel(pf: PixelFormat, value: number): Buffer {
  const b = Buffer.alloc(pf.bitsPerPixel / 8);
  if (b.length === 1) b[0] = value;
  else if (b.length === 2) {
    if (pf.bigEndian) b.writeUInt16BE(value);
    else b.writeUInt16LE(value);
  } else if (pf.bigEndian) b.writeUInt32BE(value);
  else b.writeUInt32LE(value);
  return b;
}

const is888 = (pf: PixelFormat) => pf.trueColour && pf.bitsPerPixel === 32 && pf.depth === 24 && pf.redMax === 255 && pf.greenMax === 255 && pf.blueMax === 255;

/** Tight TPIXEL: R, G, B for 32 bpp depth 24 8-bit channels, else a PIXEL. */
export function tpixel(pf: PixelFormat, r: number, g: number, b: number): Buffer {
  return is888(pf) ? u8(r, g, b) : encodePixel(pf, pixelValue(pf, r, g, b));
}

/** ZRLE CPIXEL (RFC 6143): the 3 bytes holding the colour bits of a 32 bpp depth ≤ 24 pixel, else a PIXEL. */
export function cpixel(pf: PixelFormat, r: number, g: number, b: number): Buffer {
  const wire = encodePixel(pf, pixelValue(pf, r, g, b));
  if (!(pf.trueColour && pf.bitsPerPixel === 32 && pf.depth <= 24)) return wire;
  const maxPixel = pixelValue(pf, pf.redMax, pf.greenMax, pf.blueMax);
  if (maxPixel < 0x1000000) return pf.bigEndian ? wire.subarray(1) : wire.subarray(0, 3);
  if ((maxPixel & 0xff) === 0) return pf.bigEndian ? wire.subarray(0, 3) : wire.subarray(1);
  return wire;
}

/** ServerInit with the pixel format before the name (the replay tests vary the format, not the name). */
export function serverInit(width: number, height: number, pf: PixelFormat, name = 'replay test'): Buffer {
  return rfbServerInit(width, height, name, pf);
}

/** The picture's pixels in the rectangle (x, y, w, h) of the picture, as `pixel` encodes each. */
function pixelsOf(pic: Picture, x: number, y: number, w: number, h: number, pixel: (r: number, g: number, b: number) => Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let row = y; row < y + h; row++) {
    for (let col = x; col < x + w; col++) {
      const i = (row * pic.width + col) * 3;
      parts.push(pixel(pic.comps[i], pic.comps[i + 1], pic.comps[i + 2]));
    }
  }
  return Buffer.concat(parts);
}

export function rawRect(pic: Picture, pf: PixelFormat, x = 0, y = 0, w = pic.width, h = pic.height): Buffer {
  return cat(rectHeader(x, y, w, h, Encoding.Raw), pixelsOf(pic, x, y, w, h, (r, g, b) => encodePixel(pf, pixelValue(pf, r, g, b))));
}

/**
 * A server-side zlib stream: a real streaming deflater, Z_SYNC_FLUSH after each piece, as RFB servers do. The
 * first piece carries the zlib header; restart() begins a new stream (what Tight's reset bits announce).
 */
export class ServerDeflater {
  private deflater = createDeflate({ level: 6 });
  private out: Buffer[] = [];

  constructor() {
    this.listen();
  }

  private listen(): void {
    this.deflater.on('data', (chunk: Buffer) => this.out.push(chunk));
  }

  restart(): void {
    this.deflater.destroy();
    this.deflater = createDeflate({ level: 6 });
    this.out = [];
    this.listen();
  }

  async compress(data: Buffer): Promise<Buffer> {
    this.deflater.write(data);
    await new Promise<void>((resolve) => this.deflater.flush(Z_SYNC_FLUSH, () => resolve()));
    for (let i = 0; i < 100 && !this.endsWithSyncMarker(); i++) await new Promise((r) => setImmediate(r));
    if (!this.endsWithSyncMarker()) throw new Error('deflater output does not end with a sync flush marker');
    const out = Buffer.concat(this.out);
    this.out = [];
    return out;
  }

  private endsWithSyncMarker(): boolean {
    const all = Buffer.concat(this.out);
    return all.length >= 4 && all.subarray(all.length - 4).equals(u8(0, 0, 0xff, 0xff));
  }

  close(): void {
    this.deflater.destroy();
  }
}

/** Tight basic-compression body: raw when under 12 bytes, else compact length + zlib data of stream `deflater`. */
async function tightBody(data: Buffer, deflater: ServerDeflater): Promise<Buffer> {
  if (data.length < 12) return data;
  const z = await deflater.compress(data);
  return cat(compactLength(z.length), z);
}

export const tight = {
  /** A solid rectangle of an 8-bit RGB colour (quantised to the format as picture() does). */
  fill: (pf: PixelFormat, x: number, y: number, w: number, h: number, rgb: [number, number, number]) => {
    const [r, g, b] = picture(1, 1, pf, () => rgb).comps;
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x80), tpixel(pf, r, g, b));
  },

  jpeg: (x: number, y: number, w: number, h: number, rgba: Buffer, quality = 90) => {
    const data = encodeJpeg({ data: rgba, width: w, height: h }, quality).data;
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x90), compactLength(data.length), data);
  },

  /** Copy filter (implicit, bit 6 clear), zlib stream `stream`, optional reset bits in the low nibble. */
  copy: async (pic: Picture, pf: PixelFormat, deflater: ServerDeflater, stream = 0, resetBits = 0, x = 0, y = 0, w = pic.width, h = pic.height) => {
    const data = pixelsOf(pic, x, y, w, h, (r, g, b) => tpixel(pf, r, g, b));
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8((stream << 4) | resetBits), await tightBody(data, deflater));
  },

  /** Palette filter: the picture's colours (at most 256) as a palette, 1 bit per pixel for 2 colours. */
  palette: async (pic: Picture, pf: PixelFormat, deflater: ServerDeflater, stream = 1, x = 0, y = 0, w = pic.width, h = pic.height) => {
    const keys: string[] = [];
    const index = new Map<string, number>();
    const indices: number[] = [];
    for (let row = y; row < y + h; row++) {
      for (let col = x; col < x + w; col++) {
        const i = (row * pic.width + col) * 3;
        const key = `${pic.comps[i]},${pic.comps[i + 1]},${pic.comps[i + 2]}`;
        if (!index.has(key)) {
          index.set(key, keys.length);
          keys.push(key);
        }
        indices.push(index.get(key) as number);
      }
    }
    if (keys.length > 256 || keys.length < 2) throw new Error(`palette of ${keys.length} colours`);
    const palette = Buffer.concat(keys.map((k) => tpixel(pf, ...(k.split(',').map(Number) as [number, number, number]))));
    let data: Buffer;
    if (keys.length === 2) {
      const stride = Math.floor((w + 7) / 8);
      data = Buffer.alloc(stride * h);
      indices.forEach((v, i) => {
        const row = Math.floor(i / w);
        const col = i % w;
        if (v) data[row * stride + (col >> 3)] |= 0x80 >> (col & 7);
      });
    } else {
      data = Buffer.from(indices);
    }
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x40 | (stream << 4)), u8(1), u8(keys.length - 1), palette, await tightBody(data, deflater));
  },

  /** Gradient filter: residuals of the left + above − above-left prediction, per channel modulo max + 1. */
  gradient: async (pic: Picture, pf: PixelFormat, deflater: ServerDeflater, stream = 2, x = 0, y = 0, w = pic.width, h = pic.height) => {
    const max = is888(pf) ? [255, 255, 255] : [pf.redMax, pf.greenMax, pf.blueMax];
    const at = (col: number, row: number, c: number) => (col < 0 || row < 0 ? 0 : pic.comps[((y + row) * pic.width + x + col) * 3 + c]);
    const parts: Buffer[] = [];
    for (let row = 0; row < h; row++) {
      for (let col = 0; col < w; col++) {
        const residual = [0, 1, 2].map((c) => {
          let predicted = col === 0 ? at(0, row - 1, c) : at(col, row - 1, c) + at(col - 1, row, c) - at(col - 1, row - 1, c);
          predicted = Math.min(max[c], Math.max(0, predicted));
          return (at(col, row, c) - predicted) & max[c];
        });
        parts.push(tpixel(pf, residual[0], residual[1], residual[2]));
      }
    }
    return cat(rectHeader(x, y, w, h, Encoding.Tight), u8(0x40 | (stream << 4)), u8(2), await tightBody(Buffer.concat(parts), deflater));
  },
};

export type ZrleTileKind = 'raw' | 'solid' | 'packed' | 'rle' | 'palette-rle';

/**
 * A ZRLE rectangle of the picture region, each 64x64 tile in the subencoding `kindOf(tileIndex)` picks (solid
 * and palettes use the tile's own colours; the caller chooses pictures where that is possible).
 */
export async function zrleRect(pic: Picture, pf: PixelFormat, deflater: ServerDeflater, kindOf: (tile: number) => ZrleTileKind, x = 0, y = 0, w = pic.width, h = pic.height): Promise<Buffer> {
  const parts: Buffer[] = [];
  let tile = 0;
  for (let ty = 0; ty < h; ty += 64) {
    for (let tx = 0; tx < w; tx += 64) {
      const tw = Math.min(64, w - tx);
      const th = Math.min(64, h - ty);
      const colours: Buffer[] = [];
      for (let row = 0; row < th; row++) {
        for (let col = 0; col < tw; col++) {
          const i = ((y + ty + row) * pic.width + x + tx + col) * 3;
          colours.push(cpixel(pf, pic.comps[i], pic.comps[i + 1], pic.comps[i + 2]));
        }
      }
      const keys = [...new Set(colours.map((c) => c.toString('hex')))];
      const indexOf = (c: Buffer) => keys.indexOf(c.toString('hex'));
      const runs: [Buffer, number][] = [];
      for (const c of colours) {
        const last = runs[runs.length - 1];
        if (last && last[0].equals(c)) last[1]++;
        else runs.push([c, 1]);
      }
      const runLength = (n: number) => {
        const bytes: number[] = [];
        let left = n - 1;
        while (left >= 255) {
          bytes.push(255);
          left -= 255;
        }
        bytes.push(left);
        return Buffer.from(bytes);
      };
      const kind = kindOf(tile++);
      switch (kind) {
        case 'raw':
          parts.push(u8(0), ...colours);
          break;
        case 'solid':
          if (keys.length !== 1) throw new Error('solid tile with several colours');
          parts.push(u8(1), colours[0]);
          break;
        case 'packed': {
          if (keys.length < 2 || keys.length > 16) throw new Error(`packed palette of ${keys.length} colours`);
          const bits = keys.length === 2 ? 1 : keys.length <= 4 ? 2 : 4;
          const rowBytes = Math.ceil((tw * bits) / 8);
          const packed = Buffer.alloc(rowBytes * th);
          colours.forEach((c, i) => {
            const row = Math.floor(i / tw);
            const bit = (i % tw) * bits;
            packed[row * rowBytes + (bit >> 3)] |= indexOf(c) << (8 - bits - (bit & 7));
          });
          parts.push(u8(keys.length), ...keys.map((k) => Buffer.from(k, 'hex')), packed);
          break;
        }
        case 'rle':
          parts.push(u8(128));
          for (const [c, n] of runs) parts.push(c, runLength(n));
          break;
        case 'palette-rle':
          if (keys.length < 2 || keys.length > 127) throw new Error(`RLE palette of ${keys.length} colours`);
          parts.push(u8(128 + keys.length), ...keys.map((k) => Buffer.from(k, 'hex')));
          for (const [c, n] of runs) parts.push(n === 1 ? u8(indexOf(c)) : cat(u8(indexOf(c) | 0x80), runLength(n)));
          break;
      }
    }
  }
  const z = await deflater.compress(Buffer.concat(parts));
  return cat(rectHeader(x, y, w, h, Encoding.ZRLE), u32(z.length), z);
}

/** A capture segment: the magic, then the records. */
export function segment(...records: Buffer[]): Buffer {
  return Buffer.concat([CAPTURE_MAGIC, ...records]);
}

export const record = {
  server: (at: number, bytes: Buffer) => encodeCaptureRecord(CaptureRecordKind.Server, at, bytes),
  pixelFormat: (at: number, pf: PixelFormat) => encodeCaptureRecord(CaptureRecordKind.PixelFormat, at, encodePixelFormat(pf)),
  end: (at: number) => encodeCaptureRecord(CaptureRecordKind.End, at),
  pointer: (at: number, x: number, y: number) => encodeCaptureRecord(CaptureRecordKind.Pointer, at, cat(u16(x), u16(y))),
};
