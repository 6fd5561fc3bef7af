/** RFB PIXEL_FORMAT (RFC 6143 §7.4): 16 bytes on the wire. */
export interface PixelFormat {
  bitsPerPixel: number;
  depth: number;
  bigEndian: boolean;
  trueColour: boolean;
  redMax: number;
  greenMax: number;
  blueMax: number;
  redShift: number;
  greenShift: number;
  blueShift: number;
}

/** 32 bpp, depth 24, little-endian true colour with R in the low byte: bytes on the wire are R, G, B, X. */
export const RGBX32: PixelFormat = Object.freeze({
  bitsPerPixel: 32,
  depth: 24,
  bigEndian: false,
  trueColour: true,
  redMax: 255,
  greenMax: 255,
  blueMax: 255,
  redShift: 0,
  greenShift: 8,
  blueShift: 16,
});

export function parsePixelFormat(buf: Buffer, offset = 0): PixelFormat {
  return {
    bitsPerPixel: buf[offset],
    depth: buf[offset + 1],
    bigEndian: buf[offset + 2] !== 0,
    trueColour: buf[offset + 3] !== 0,
    redMax: buf.readUInt16BE(offset + 4),
    greenMax: buf.readUInt16BE(offset + 6),
    blueMax: buf.readUInt16BE(offset + 8),
    redShift: buf[offset + 10],
    greenShift: buf[offset + 11],
    blueShift: buf[offset + 12],
  };
}

export function encodePixelFormat(pf: PixelFormat): Buffer {
  const buf = Buffer.alloc(16);
  buf[0] = pf.bitsPerPixel;
  buf[1] = pf.depth;
  buf[2] = pf.bigEndian ? 1 : 0;
  buf[3] = pf.trueColour ? 1 : 0;
  buf.writeUInt16BE(pf.redMax, 4);
  buf.writeUInt16BE(pf.greenMax, 6);
  buf.writeUInt16BE(pf.blueMax, 8);
  buf[10] = pf.redShift;
  buf[11] = pf.greenShift;
  buf[12] = pf.blueShift;
  return buf;
}

/** RFC 6143 allows 8, 16 and 32 bits per pixel only. */
export function isValidBpp(bpp: number): boolean {
  return bpp === 8 || bpp === 16 || bpp === 32;
}

export function bytesPerPixel(pf: PixelFormat): number {
  return pf.bitsPerPixel / 8;
}

/**
 * Size of a Tight/ZRLE "compact pixel" (TPIXEL / CPIXEL): 3 bytes when the format is 32 bpp true colour,
 * depth 24 with 8-bit channels (RFC 6143 §7.7.6 ZRLE; Tight encoding spec), else bits-per-pixel / 8.
 */
export function compactPixelSize(pf: PixelFormat): number {
  if (pf.trueColour && pf.bitsPerPixel === 32 && pf.depth === 24 && pf.redMax === 255 && pf.greenMax === 255 && pf.blueMax === 255) return 3;
  return pf.bitsPerPixel / 8;
}
