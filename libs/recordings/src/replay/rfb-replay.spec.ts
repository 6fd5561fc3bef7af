import { decode as decodeJpeg } from 'jpeg-js';
import { Encoding, PixelFormat, encodePixelFormat } from '@ws/stream';
import { ReplayDecodeError } from './errors';
import { RfbReplayDecoder } from './rfb-replay';
import {
  FORMATS,

  ServerDeflater,
  busy,
  cat,
  compactLength,
  encodePixel,
  expectedRgba,
  picture,
  pixelValue,
  rawRect,
  rectHeader,
  serverInit,
  tight,
  u16,
  u32,
  u8,
  update,
  zrleRect,
} from './replay-test-helpers';

/** The decoder's framebuffer region (x, y, w, h) as RGBA bytes. */
function region(decoder: RfbReplayDecoder, x: number, y: number, w: number, h: number): Buffer {
  const fb = decoder.framebuffer;
  const out = Buffer.alloc(w * h * 4);
  for (let row = 0; row < h; row++) fb.data.copy(out, row * w * 4, ((y + row) * fb.width + x) * 4, ((y + row) * fb.width + x + w) * 4);
  return out;
}

function decoderWith(width: number, height: number, pf: PixelFormat, ...messages: Buffer[]): RfbReplayDecoder {
  const decoder = new RfbReplayDecoder();
  decoder.push(cat(serverInit(width, height, pf), ...messages));
  return decoder;
}

/** First differing pixel, for readable failures. */
function sameImage(actual: Buffer, expected: Buffer, width: number): string {
  for (let i = 0; i < expected.length; i += 4) {
    if (actual.readUInt32BE(i) !== expected.readUInt32BE(i)) {
      const p = i / 4;
      return `pixel (${p % width}, ${Math.floor(p / width)}) is ${actual.subarray(i, i + 4).toString('hex')}, expected ${expected.subarray(i, i + 4).toString('hex')}`;
    }
  }
  return actual.length === expected.length ? 'same' : `length ${actual.length} vs ${expected.length}`;
}

const W = 70;
const H = 45;

describe('RfbReplayDecoder', () => {
  describe('ServerInit and Raw in every kind of pixel format', () => {
    for (const [name, pf] of Object.entries(FORMATS)) {
      it(`decodes Raw in ${name}`, () => {
        const pic = picture(W, H, pf, busy(3));
        const decoder = decoderWith(W, H, pf, update([rawRect(pic, pf)]));
        expect(decoder.initialized).toBe(true);
        expect([decoder.width, decoder.height, decoder.name]).toEqual([W, H, 'replay test']);
        expect(sameImage(region(decoder, 0, 0, W, H), expectedRgba(pic, pf), W)).toBe('same');
      });
    }

    it('decodes colour-mapped pixels through SetColourMapEntries', () => {
      const pf = { ...FORMATS.bgr233, trueColour: false };
      // Entries 10..12: red, green, a grey given as 16-bit values (the high byte counts).
      const colours = cat(u16(0xff00), u16(0), u16(0), u16(0), u16(0xffff), u16(0), u16(0x8080), u16(0x8080), u16(0x8080));
      const setColours = cat(u8(1, 0), u16(10), u16(3), colours);
      const raw = cat(rectHeader(0, 0, 3, 1, Encoding.Raw), u8(10, 11, 12));
      const decoder = decoderWith(3, 1, pf, setColours, update([raw]));
      expect(region(decoder, 0, 0, 3, 1).toString('hex')).toBe('ff0000ff' + '00ff00ff' + '808080ff');
    });

    it('starts black and refuses a framebuffer above maxPixels', () => {
      const decoder = decoderWith(4, 2, FORMATS.rgbx32);
      expect(decoder.framebuffer.data.toString('hex')).toBe('000000ff'.repeat(8));
      expect(() => new RfbReplayDecoder({ maxPixels: 100 }).push(serverInit(20, 20, FORMATS.rgbx32))).toThrow(/exceeds 100 pixels/);
    });
  });

  it('decodes the same stream identically when it arrives one byte at a time', async () => {
    const pf = FORMATS.rgbx32;
    const pic = picture(W, H, pf, busy(5));
    const zrle = new ServerDeflater();
    const t0 = new ServerDeflater();
    const stream = cat(serverInit(W, H, pf), update([await zrleRect(pic, pf, zrle, () => 'raw', 0, 0, 40, 45), await tight.copy(pic, pf, t0, 0, 0, 40, 0, 30, 45)]));
    zrle.close();
    t0.close();
    const decoder = new RfbReplayDecoder();
    for (const byte of stream) decoder.push(u8(byte));
    expect(sameImage(region(decoder, 0, 0, W, H), expectedRgba(pic, pf), W)).toBe('same');
  });

  describe('CopyRect', () => {
    it('copies overlapping regions in either direction', () => {
      const pf = FORMATS.rgbx32;
      const pic = picture(W, H, pf, busy(1));
      const expected = expectedRgba(pic, pf);
      const copy = (dx: number, dy: number, sx: number, sy: number, w: number, h: number) => cat(rectHeader(dx, dy, w, h, Encoding.CopyRect), u16(sx), u16(sy));
      const decoder = decoderWith(W, H, pf, update([rawRect(pic, pf)]), update([copy(5, 4, 0, 0, 50, 30)]), update([copy(0, 0, 10, 8, 40, 20)]));
      // Apply the same two copies to the expected picture by hand.
      const move = (img: Buffer, dx: number, dy: number, sx: number, sy: number, w: number, h: number) => {
        const src = Buffer.from(img);
        for (let row = 0; row < h; row++) src.copy(img, ((dy + row) * W + dx) * 4, ((sy + row) * W + sx) * 4, ((sy + row) * W + sx + w) * 4);
      };
      move(expected, 5, 4, 0, 0, 50, 30);
      move(expected, 0, 0, 10, 8, 40, 20);
      expect(sameImage(region(decoder, 0, 0, W, H), expected, W)).toBe('same');
    });
  });

  describe('Tight', () => {
    let deflaters: ServerDeflater[];
    beforeEach(() => {
      deflaters = [0, 1, 2, 3].map(() => new ServerDeflater());
    });
    afterEach(() => deflaters.forEach((d) => d.close()));

    for (const name of ['rgbx32', 'bgrx32be', 'rgb565', 'rgb565be', 'bgr233', 'rgb30'] as const) {
      const pf = FORMATS[name];

      it(`fill, copy, palette and gradient filters over the four zlib streams in ${name}`, async () => {
        const pic = picture(W, H, pf, busy(7));
        // Two colours left, five colours in the middle, solid on the right bottom.
        const two = picture(W, H, pf, (x, y) => ((x + y) % 3 === 0 ? [250, 10, 10] : [10, 10, 250]));
        const five = picture(W, H, pf, (x, y) => [[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255]][(x * y) % 5] as [number, number, number]);
        const first = update([
          await tight.copy(pic, pf, deflaters[0], 0, 0, 0, 0, 20, 20),
          await tight.palette(two, pf, deflaters[1], 1, 20, 0, 20, 20),
          await tight.palette(five, pf, deflaters[3], 3, 40, 0, 20, 20),
          await tight.gradient(pic, pf, deflaters[2], 2, 0, 20, 60, 25),
          tight.fill(pf, 60, 0, 10, 45, [255, 255, 0]),
        ]);
        // Later rects continue the same zlib streams (their data refers back to the earlier output).
        const second = update([await tight.copy(pic, pf, deflaters[0], 0, 0, 0, 0, 20, 20), await tight.gradient(pic, pf, deflaters[2], 2, 0, 20, 60, 25)]);
        const decoder = decoderWith(W, H, pf, first, second);
        const whole = expectedRgba(pic, pf);
        const part = (img: Buffer, x: number, y: number, w: number, h: number) => {
          const out = Buffer.alloc(w * h * 4);
          for (let row = 0; row < h; row++) img.copy(out, row * w * 4, ((y + row) * W + x) * 4, ((y + row) * W + x + w) * 4);
          return out;
        };
        expect(sameImage(region(decoder, 0, 0, 20, 20), part(whole, 0, 0, 20, 20), 20)).toBe('same');
        expect(sameImage(region(decoder, 20, 0, 20, 20), part(expectedRgba(two, pf), 20, 0, 20, 20), 20)).toBe('same');
        expect(sameImage(region(decoder, 40, 0, 20, 20), part(expectedRgba(five, pf), 40, 0, 20, 20), 20)).toBe('same');
        expect(sameImage(region(decoder, 0, 20, 60, 25), part(whole, 0, 20, 60, 25), 60)).toBe('same');
        const yellow = expectedRgba(picture(1, 1, pf, () => [255, 255, 0]), pf);
        expect(region(decoder, 65, 30, 1, 1)).toEqual(yellow);
      });
    }

    it('uses the 3-byte TPIXEL only for 32 bpp depth 24 (and 4 bytes for depth 30)', async () => {
      const fill24 = tight.fill(FORMATS.rgbx32, 0, 0, 1, 1, [1, 2, 3]);
      const fill30 = tight.fill(FORMATS.rgb30, 0, 0, 1, 1, [1, 2, 3]);
      expect(fill24.length).toBe(12 + 1 + 3);
      expect(fill30.length).toBe(12 + 1 + 4);
      expect(region(decoderWith(1, 1, FORMATS.rgbx32, update([fill24])), 0, 0, 1, 1).toString('hex')).toBe('010203ff');
    });

    it('sends data under 12 bytes uncompressed without touching the stream', async () => {
      const pf = FORMATS.rgbx32;
      const pic = picture(3, 1, pf, busy(2)); // 9 bytes of TPIXELs
      const small = await tight.copy(pic, pf, deflaters[0]);
      expect(small.length).toBe(12 + 1 + 9);
      const big = picture(W, H, pf, busy(4));
      const decoder = decoderWith(W, H, pf, update([small]), update([await tight.copy(big, pf, deflaters[0])]));
      expect(sameImage(region(decoder, 0, 0, W, H), expectedRgba(big, pf), W)).toBe('same');
    });

    it('starts a fresh zlib stream when the reset bit says so', async () => {
      const pf = FORMATS.rgbx32;
      const pic = picture(W, H, pf, busy(8));
      const first = await tight.copy(pic, pf, deflaters[1], 1);
      deflaters[1].restart();
      const afterReset = await tight.copy(pic, pf, deflaters[1], 1, 0b0010);
      const decoder = decoderWith(W, H, pf, update([first]), update([afterReset]));
      expect(sameImage(region(decoder, 0, 0, W, H), expectedRgba(pic, pf), W)).toBe('same');
      // Without the reset bit the second stream's zlib header lands in the middle of the old stream.
      deflaters[1].restart();
      const noReset = await tight.copy(pic, pf, deflaters[1], 1, 0);
      expect(() => decoderWith(W, H, pf, update([first]), update([noReset]))).toThrow(ReplayDecodeError);
    });

    it('draws JPEG rectangles as jpeg-js decodes them, close to the source', () => {
      const pf = FORMATS.rgbx32;
      const pic = picture(48, 32, pf, (x, y) => [x * 5, y * 7, 128]);
      const source = expectedRgba(pic, pf);
      const rect = tight.jpeg(10, 5, 48, 32, source);
      const decoder = decoderWith(W, H, pf, update([rect]));
      const drawn = region(decoder, 10, 5, 48, 32);
      const jpegData = rect.subarray(12 + 1 + compactLength(rect.length - 12 - 1 - 2).length);
      expect(Buffer.from(decodeJpeg(jpegData, { useTArray: true, formatAsRGBA: true }).data)).toEqual(drawn);
      let worst = 0;
      for (let i = 0; i < source.length; i++) worst = Math.max(worst, Math.abs(source[i] - drawn[i]));
      expect(worst).toBeLessThan(40);
      expect(decoder.stats.jpegRects).toBe(1);
    });

    it('refuses TightPNG and a JPEG of the wrong size', () => {
      const pf = FORMATS.rgbx32;
      expect(() => decoderWith(8, 8, pf, update([cat(rectHeader(0, 0, 8, 8, Encoding.Tight), u8(0xa0), u8(0))]))).toThrow(/TightPNG/);
      const jpeg = tight.jpeg(0, 0, 4, 4, Buffer.alloc(64, 200));
      jpeg.writeUInt16BE(8, 4); // claims 8 wide
      expect(() => decoderWith(8, 8, pf, update([jpeg]))).toThrow(/JPEG of 4x4 in a 8x4/);
    });
  });

  describe('ZRLE', () => {
    const kinds = ['raw', 'solid', 'packed', 'rle', 'palette-rle'] as const;

    for (const name of ['rgbx32', 'xrgb32be', 'high24le', 'rgb30', 'rgb565', 'bgr233'] as const) {
      const pf = FORMATS[name];
      it(`decodes every tile subencoding across tile edges in ${name}`, async () => {
        // 150x100: 3x2 tiles, the right and bottom ones partial. Colours per tile fit every subencoding.
        const w = 150;
        const h = 100;
        const tileOf = (x: number, y: number) => Math.floor(y / 64) * 3 + Math.floor(x / 64);
        const pic = picture(w, h, pf, (x, y) => {
          const t = tileOf(x, y);
          if (t === 1) return [0, 200, 100]; // solid
          if (t === 2) return (x + y) % 4 === 0 ? [255, 0, 0] : (x * y) % 3 === 0 ? [0, 0, 255] : [0, 255, 0]; // 3 colours, packed
          if (t === 4) return [Math.floor(x / 9) * 15, 50, 50]; // long runs, few colours
          return busy(t)(x, y);
        });
        const deflater = new ServerDeflater();
        const kindOf = (t: number) => [kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], kinds[3]][t];
        const first = await zrleRect(pic, pf, deflater, kindOf);
        // A second rect on the same (connection-wide) zlib stream.
        const second = await zrleRect(pic, pf, deflater, () => 'raw', 10, 10, 30, 20);
        deflater.close();
        const decoder = decoderWith(w, h, pf, update([first]), update([second]));
        expect(sameImage(region(decoder, 0, 0, w, h), expectedRgba(pic, pf), w)).toBe('same');
      });
    }

    it('decodes runs longer than 255 pixels and the 16-colour packed palette', async () => {
      const pf = FORMATS.rgbx32;
      const runs = picture(64, 64, pf, (x, y) => (y < 40 ? [10, 20, 30] : [x * 4, 0, 0]));
      const packed = picture(64, 64, pf, (x, y) => [((x + y) % 16) * 16, 0, 0]);
      const deflater = new ServerDeflater();
      const a = await zrleRect(runs, pf, deflater, () => 'rle');
      const b = await zrleRect(packed, pf, deflater, () => 'packed');
      deflater.close();
      expect(sameImage(region(decoderWith(64, 64, pf, update([a])), 0, 0, 64, 64), expectedRgba(runs, pf), 64)).toBe('same');
      const decoder = decoderWith(64, 64, pf, update([a]), update([b]));
      expect(sameImage(region(decoder, 0, 0, 64, 64), expectedRgba(packed, pf), 64)).toBe('same');
    });

    it('refuses an oversized zlib length and data that runs past the tile', async () => {
      const pf = FORMATS.rgbx32;
      expect(() => decoderWith(8, 8, pf, update([cat(rectHeader(0, 0, 8, 8, Encoding.ZRLE), u32(0x7fffffff))]))).toThrow(/zlib data/);
      const deflater = new ServerDeflater();
      const z = await deflater.compress(cat(u8(128), u8(1, 2, 3), u8(200))); // a run of 201 in a 64-pixel tile
      deflater.close();
      expect(() => decoderWith(8, 8, pf, update([cat(rectHeader(0, 0, 8, 8, Encoding.ZRLE), u32(z.length), z)]))).toThrow(/run of 201/);
    });
  });

  describe('pseudo-encodings and other messages', () => {
    const pf = FORMATS.rgbx32;

    it('resizes on DesktopSize and ExtendedDesktopSize, keeping the overlapping picture', () => {
      const pic = picture(10, 10, pf, busy(1));
      const decoder = decoderWith(10, 10, pf, update([rawRect(pic, pf)]), update([rectHeader(0, 0, 6, 12, Encoding.DesktopSize)]));
      expect([decoder.width, decoder.height]).toEqual([6, 12]);
      const expected = expectedRgba(pic, pf);
      for (let y = 0; y < 10; y++) expect(region(decoder, 0, y, 6, 1)).toEqual(expected.subarray(y * 40, y * 40 + 24));
      expect(region(decoder, 0, 11, 6, 1).toString('hex')).toBe('000000ff'.repeat(6));
      const extended = (w: number, h: number, status: number) => cat(rectHeader(1, status, w, h, Encoding.ExtendedDesktopSize), u8(1, 0, 0, 0), Buffer.alloc(16));
      decoder.push(update([extended(20, 5, 0)]));
      expect([decoder.width, decoder.height]).toEqual([20, 5]);
      decoder.push(update([extended(30, 30, 3)])); // a refused request: no change
      expect([decoder.width, decoder.height]).toEqual([20, 5]);
    });

    it('ends an update at LastRect and skips or applies the sized pseudo-encodings', () => {
      const cursor = cat(rectHeader(1, 2, 2, 2, Encoding.Cursor), encodePixel(pf, pixelValue(pf, 255, 0, 0)), encodePixel(pf, 0), encodePixel(pf, 0), encodePixel(pf, pixelValue(pf, 0, 0, 255)), u8(0x80, 0x40));
      const xcursor = cat(rectHeader(0, 0, 3, 1, Encoding.XCursor), u8(255, 255, 255, 0, 0, 0), u8(0b10100000), u8(0b11000000));
      const name = Buffer.from('renamed desktop');
      const rects = [
        rectHeader(0, 0, 0, 0, Encoding.QemuExtendedKeyEvent),
        cat(rectHeader(0, 0, 0, 0, Encoding.QemuLedState), u8(3)),
        cat(rectHeader(0, 0, 0, 0, Encoding.DesktopName), u32(name.length), name),
        cursor,
        rectHeader(7, 8, 0, 0, Encoding.PointerPos),
        rectHeader(0, 0, 0, 0, Encoding.LastRect),
      ];
      const bell = u8(2);
      const cutText = cat(u8(3, 0, 0, 0), u32(5), Buffer.from('hello'));
      const fill = tight.fill(pf, 0, 0, 1, 1, [9, 9, 9]);
      const decoder = decoderWith(16, 16, pf, update(rects, 0xffff), bell, cutText, update([fill]));
      expect(decoder.name).toBe('renamed desktop');
      expect(decoder.pointerPosition).toEqual({ x: 7, y: 8 });
      expect(decoder.cursor).toMatchObject({ width: 2, height: 2, hotX: 1, hotY: 2 });
      expect(decoder.cursor?.data.toString('hex')).toBe('ff0000ff' + '00000000' + '00000000' + '0000ffff');
      expect(decoder.stats.bells).toBe(1);
      expect(region(decoder, 0, 0, 1, 1).toString('hex')).toBe('090909ff');
      decoder.push(update([xcursor]));
      // Bitmap 101 (fg, bg, fg), mask 110.
      expect(decoder.cursor?.data.toString('hex')).toBe('ffffffff' + '000000ff' + 'ffffff00');
      decoder.push(update([rectHeader(0, 0, 0, 0, Encoding.XCursor)]));
      expect(decoder.cursor).toBeUndefined();
    });

    it('passes over continuous updates\' end and fences between updates (a browser on Xvnc asks for them)', () => {
      const first = picture(4, 4, pf, busy(1));
      const second = picture(4, 4, pf, busy(2));
      const fence = (payload: Buffer) => cat(u8(248, 0, 0, 0), u32(0x80000002), u8(payload.length), payload);
      const decoder = decoderWith(4, 4, pf, cat(u8(150), update([rawRect(first, pf)]), fence(Buffer.from('xyz')), fence(Buffer.alloc(0)), update([rawRect(second, pf)])));
      expect(region(decoder, 0, 0, 4, 4)).toEqual(expectedRgba(second, pf));
      expect(() => decoderWith(4, 4, pf, fence(Buffer.alloc(65)))).toThrow(ReplayDecodeError);
    });

    it('switches pixel format at the next server message after a SetPixelFormat', () => {
      const small = picture(4, 4, FORMATS.rgb565, busy(2));
      const decoder = decoderWith(4, 4, pf);
      decoder.setPixelFormat(encodePixelFormat(FORMATS.rgb565));
      decoder.push(update([rawRect(small, FORMATS.rgb565)]));
      expect(region(decoder, 0, 0, 4, 4)).toEqual(expectedRgba(small, FORMATS.rgb565));
      expect(decoder.pixelFormat).toEqual(FORMATS.rgb565);
    });
  });

  describe('garbage', () => {
    const pf = FORMATS.rgbx32;

    it('throws ReplayDecodeError with a clear message and keeps failing afterwards', () => {
      const decoder = new RfbReplayDecoder();
      decoder.push(serverInit(8, 8, pf));
      expect(() => decoder.push(u8(9))).toThrow(/unknown server message type 9/);
      expect(() => decoder.push(u8(2))).toThrow(ReplayDecodeError);
      expect(() => decoderWith(8, 8, pf, update([rawRect(picture(8, 8, pf, busy()), pf, 4, 4, 8, 8)]))).toThrow(/outside the 8x8 framebuffer/);
      expect(() => decoderWith(8, 8, pf, update([rectHeader(0, 0, 1, 1, Encoding.Hextile)]))).toThrow(/encoding 5/);
      expect(() => decoderWith(8, 8, pf, update([cat(rectHeader(0, 0, 8, 8, Encoding.Tight), u8(0), compactLength(20), Buffer.alloc(20, 0x55))]))).toThrow(/zlib/);
      expect(() => new RfbReplayDecoder().push(cat(u16(8), u16(8), encodePixelFormat({ ...pf, bitsPerPixel: 24 }), u32(0)))).toThrow(/24 bits per pixel/);
    });

    it('never hangs or grows without bound on random bytes', () => {
      let seed = 12345;
      const random = () => {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        return seed >> 16;
      };
      for (let round = 0; round < 200; round++) {
        const decoder = new RfbReplayDecoder({ maxPixels: 1 << 20 });
        const bytes = Buffer.from(Array.from({ length: 2000 }, () => random() & 255));
        try {
          decoder.push(cat(serverInit(64, 64, pf), bytes));
        } catch (error) {
          expect(error).toBeInstanceOf(ReplayDecodeError);
        }
        expect(decoder.width * decoder.height).toBeLessThanOrEqual(1 << 20);
      }
    });
  });
});
