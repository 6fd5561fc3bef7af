/**
 * Server pixel values → RGBA, for any RFB pixel format a server may use: true colour at 8/16/32 bits per pixel,
 * either byte order, arbitrary shifts and maxes, or colour-mapped (SetColourMapEntries). Pixels are handled as
 * packed RGBA words in the machine's byte order so a Uint32Array view of the framebuffer stores them directly.
 */
import { PixelFormat, compactPixelSize, isValidBpp } from '@ws/stream';
import { ReplayDecodeError } from './errors';

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Packed RGBA word (alpha 255) whose memory bytes are R, G, B, A. */
export function packRgba(r: number, g: number, b: number): number {
  return LITTLE_ENDIAN_HOST ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0 : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0;
}

export const BLACK = packRgba(0, 0, 0);

/** Maps a channel value 0..max to 0..255 (rounded); max 0 maps to 0. */
function channelTable(max: number): Uint8Array {
  const table = new Uint8Array(max + 1);
  if (max > 0) for (let i = 0; i <= max; i++) table[i] = Math.round((i * 255) / max);
  return table;
}

/** The colour map of a colour-mapped session (up to 65536 entries, as SetColourMapEntries addresses them). */
export class ColourMap {
  readonly entries = new Uint32Array(65536).fill(BLACK);

  /** Applies SetColourMapEntries: `colours` holds 6 bytes (u16 R, G, B) per entry. */
  set(first: number, colours: Buffer): void {
    const count = colours.length / 6;
    if (first + count > this.entries.length) throw new ReplayDecodeError(`colour map entries ${first}..${first + count - 1} beyond 65535`);
    for (let i = 0; i < count; i++) {
      this.entries[first + i] = packRgba(colours[i * 6], colours[i * 6 + 2], colours[i * 6 + 4]); // high byte of each u16
    }
  }
}

/** Which wire form a pixel takes: a full PIXEL, a Tight TPIXEL or a ZRLE CPIXEL. */
export type PixelForm = 'pixel' | 'tight' | 'zrle';

export function checkPixelFormat(pf: PixelFormat): void {
  if (!isValidBpp(pf.bitsPerPixel)) {
    throw new ReplayDecodeError(`pixel format with ${pf.bitsPerPixel} bits per pixel (RFB allows 8, 16, 32)`);
  }
  if (pf.trueColour) {
    for (const [max, shift] of [
      [pf.redMax, pf.redShift],
      [pf.greenMax, pf.greenShift],
      [pf.blueMax, pf.blueShift],
    ]) {
      if (shift >= pf.bitsPerPixel) throw new ReplayDecodeError(`pixel format shift ${shift} beyond ${pf.bitsPerPixel} bits per pixel`);
      if (max >= 2 ** pf.bitsPerPixel) throw new ReplayDecodeError(`pixel format channel max ${max} beyond ${pf.bitsPerPixel} bits per pixel`);
    }
  }
}

/** Decodes the pixels of one pixel format. */
export class PixelDecoder {
  readonly bytesPerPixel: number;
  /** Tight TPIXEL: R, G, B bytes for 32 bpp depth 24 with 8-bit channels (Tight spec), else a PIXEL. */
  readonly tightPixelBytes: number;
  /** ZRLE CPIXEL (RFC 6143 §7.7.6): the 3 significant bytes of a 32 bpp depth ≤ 24 pixel, else a PIXEL. */
  readonly zrlePixelBytes: number;
  /** Whether a 3-byte CPIXEL holds wire bytes 0..2 of the pixel (else 1..3). */
  private readonly zrleLowBytesFirst: boolean;
  private readonly red: Uint8Array;
  private readonly green: Uint8Array;
  private readonly blue: Uint8Array;
  /** Every pixel value's RGBA for 8 and 16 bpp (or the live colour map). */
  private readonly direct: Uint32Array | undefined;
  private readonly scratch = new Uint32Array(1);

  constructor(
    readonly format: PixelFormat,
    colourMap: ColourMap,
  ) {
    checkPixelFormat(format);
    const pf = format;
    this.bytesPerPixel = pf.bitsPerPixel / 8;
    this.red = channelTable(pf.redMax);
    this.green = channelTable(pf.greenMax);
    this.blue = channelTable(pf.blueMax);
    this.tightPixelBytes = compactPixelSize(pf);
    const maxPixel = pf.trueColour ? ((pf.redMax << pf.redShift) | (pf.greenMax << pf.greenShift) | (pf.blueMax << pf.blueShift)) >>> 0 : 0;
    const fitsLow3 = maxPixel < 0x1000000;
    const fitsHigh3 = (maxPixel & 0xff) === 0;
    this.zrlePixelBytes = pf.trueColour && pf.bitsPerPixel === 32 && pf.depth <= 24 && (fitsLow3 || fitsHigh3) ? 3 : this.bytesPerPixel;
    this.zrleLowBytesFirst = (fitsLow3 && !pf.bigEndian) || (fitsHigh3 && pf.bigEndian);
    if (!pf.trueColour) {
      this.direct = colourMap.entries;
    } else if (pf.bitsPerPixel <= 16) {
      const direct = new Uint32Array(1 << pf.bitsPerPixel);
      for (let v = 0; v < direct.length; v++) direct[v] = this.trueColour(v);
      this.direct = direct;
    }
  }

  private trueColour(value: number): number {
    const pf = this.format;
    return packRgba(this.red[(value >>> pf.redShift) & pf.redMax], this.green[(value >>> pf.greenShift) & pf.greenMax], this.blue[(value >>> pf.blueShift) & pf.blueMax]);
  }

  /** RGBA of a pixel value. */
  rgba(value: number): number {
    return this.direct ? (this.direct[value] ?? BLACK) : this.trueColour(value);
  }

  /** The pixel value of the PIXEL at buf[offset]. */
  value(buf: Uint8Array, offset: number): number {
    switch (this.bytesPerPixel) {
      case 1:
        return buf[offset];
      case 2:
        return this.format.bigEndian ? (buf[offset] << 8) | buf[offset + 1] : buf[offset] | (buf[offset + 1] << 8);
      default:
        return this.format.bigEndian
          ? ((buf[offset] << 24) | (buf[offset + 1] << 16) | (buf[offset + 2] << 8) | buf[offset + 3]) >>> 0
          : (buf[offset] | (buf[offset + 1] << 8) | (buf[offset + 2] << 16) | (buf[offset + 3] << 24)) >>> 0;
    }
  }

  /** The size of one pixel in the given wire form. */
  size(form: PixelForm): number {
    return form === 'tight' ? this.tightPixelBytes : form === 'zrle' ? this.zrlePixelBytes : this.bytesPerPixel;
  }

  /** RGBA of one pixel in the given wire form at buf[offset]. */
  read(buf: Uint8Array, offset: number, form: PixelForm): number {
    if (form === 'tight' && this.tightPixelBytes === 3) return packRgba(buf[offset], buf[offset + 1], buf[offset + 2]);
    if (form === 'zrle' && this.zrlePixelBytes === 3) {
      this.readRun(buf, offset, 1, form, this.scratch, 0);
      return this.scratch[0];
    }
    return this.rgba(this.value(buf, offset));
  }

  /** Converts `count` consecutive pixels of the given form from src[offset] into out[outIndex...]. */
  readRun(src: Uint8Array, offset: number, count: number, form: PixelForm, out: Uint32Array, outIndex: number): void {
    const size = this.size(form);
    if (size === 3 && form === 'tight') {
      for (let i = 0, s = offset; i < count; i++, s += 3) out[outIndex + i] = packRgba(src[s], src[s + 1], src[s + 2]);
      return;
    }
    if (size === 3) {
      // ZRLE CPIXEL: rebuild the 4-byte pixel value from its 3 significant bytes.
      const big = this.format.bigEndian;
      const low = this.zrleLowBytesFirst;
      for (let i = 0, s = offset; i < count; i++, s += 3) {
        const b0 = low ? src[s] : 0;
        const b1 = low ? src[s + 1] : src[s];
        const b2 = low ? src[s + 2] : src[s + 1];
        const b3 = low ? 0 : src[s + 2];
        const value = big ? ((b0 << 24) | (b1 << 16) | (b2 << 8) | b3) >>> 0 : (b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)) >>> 0;
        out[outIndex + i] = this.rgba(value);
      }
      return;
    }
    if (this.direct && size === 1) {
      for (let i = 0; i < count; i++) out[outIndex + i] = this.direct[src[offset + i]];
      return;
    }
    for (let i = 0, s = offset; i < count; i++, s += size) out[outIndex + i] = this.rgba(this.value(src, s));
  }

  /**
   * The colour components (unscaled, 0..max) of a TPIXEL, for the Tight gradient filter: the bytes themselves for
   * the 3-byte form, else (value >> shift) — masked by the caller after prediction, as the Tight spec does.
   */
  components(src: Uint8Array, offset: number, out: Int32Array): void {
    if (this.tightPixelBytes === 3) {
      out[0] = src[offset];
      out[1] = src[offset + 1];
      out[2] = src[offset + 2];
      return;
    }
    const v = this.value(src, offset);
    out[0] = v >>> this.format.redShift;
    out[1] = v >>> this.format.greenShift;
    out[2] = v >>> this.format.blueShift;
  }

  /** Component maxima for the gradient filter (255 each for the 3-byte TPIXEL). */
  componentMax(): [number, number, number] {
    if (this.tightPixelBytes === 3) return [255, 255, 255];
    return [this.format.redMax, this.format.greenMax, this.format.blueMax];
  }

  /** RGBA of gradient-filter components (each already within 0..max). */
  fromComponents(r: number, g: number, b: number): number {
    if (this.tightPixelBytes === 3) return packRgba(r, g, b);
    return packRgba(this.red[r], this.green[g], this.blue[b]);
  }
}
