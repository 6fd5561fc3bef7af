/**
 * Replays a recorded RFB server → client stream (from ServerInit on) into an RGBA framebuffer, as a browser
 * client would draw it. It decodes everything the stream gateway lets through (libs/stream/src/encodings.ts):
 * Raw, CopyRect, Tight (fill, JPEG, basic with the copy/palette/gradient filters and four zlib streams), ZRLE,
 * and the pseudo-encodings DesktopSize, ExtendedDesktopSize, LastRect, Cursor, XCursor, PointerPos,
 * DesktopName, QemuExtendedKeyEvent, QemuLedState; and the messages SetColourMapEntries, Bell, ServerCutText.
 *
 * Bytes are pushed in arbitrary pieces (StreamFeeder reassembles them); each push decodes as far as the bytes go,
 * so a caller can look at the framebuffer between pushes (the state at that moment of the recording).
 * A malformed stream throws ReplayDecodeError from push(); every size is checked against the framebuffer (capped
 * by maxPixels) before anything is read or allocated, so garbage costs at most a few framebuffers' worth of memory
 * and never hangs: each byte is consumed once.
 */
import { decode as decodeJpeg } from 'jpeg-js';
import {
  DEFAULT_MAX_PIXELS,
  Encoding,
  ParserGenerator,
  PixelFormat,
  ServerMessage,
  readFence,
  StreamFeeder,
  TightFilter,
  parsePixelFormat,
  read,
  readColourMapHeader,
  readCutTextHeader,
  readDesktopName,
  readRectHeader,
  readServerInit,
  readTightData,
  readTightHead,
  readUpdateHeader,
  skip,
} from '@ws/stream';
import { ReplayDecodeError } from './errors';
import { BLACK, ColourMap, PixelDecoder, checkPixelFormat } from './pixels';
import { ZlibStream } from './zlib-stream';

const ZRLE_TILE = 64;

export interface RfbReplayOptions {
  /** Refuse framebuffers (and cursors) larger than this many pixels. Default 40 Mpx, as RfbClient. */
  maxPixels?: number;
}

/** An RGBA image, 4 bytes per pixel, alpha 255. */
export interface ReplayImage {
  width: number;
  height: number;
  data: Buffer;
}

/** The pointer shape the server sent (Cursor/XCursor), RGBA with alpha 0 outside the mask. */
export interface ReplayCursor extends ReplayImage {
  hotX: number;
  hotY: number;
}

export interface ReplayStats {
  updates: number;
  rects: number;
  /** Rectangles per encoding number. */
  encodings: Map<number, number>;
  bells: number;
  /** Rectangles drawn from lossy Tight JPEG data (pixel-exact comparisons need a tolerance there). */
  jpegRects: number;
}

function decodeError(message: string): ReplayDecodeError {
  return new ReplayDecodeError(message);
}

export class RfbReplayDecoder {
  private readonly maxPixels: number;
  private readonly feeder: StreamFeeder;
  private failure: Error | undefined;
  private fbWidth = 0;
  private fbHeight = 0;
  private fbData: Buffer = Buffer.alloc(0);
  private pixels = new Uint32Array(0);
  private pendingFormat: PixelFormat | undefined;
  private decoder: PixelDecoder | undefined;
  private readonly colourMap = new ColourMap();
  private readonly tightStreams = [0, 1, 2, 3].map((i) => new ZlibStream(`Tight stream ${i}`));
  private readonly zrleStream = new ZlibStream('ZRLE');
  private initDone = false;
  private desktopName = '';
  private changeCount = 0;
  private cursorShape: ReplayCursor | undefined;
  private pointer: { x: number; y: number } | undefined;
  readonly stats: ReplayStats = { updates: 0, rects: 0, encodings: new Map(), bells: 0, jpegRects: 0 };

  constructor(options: RfbReplayOptions = {}) {
    this.maxPixels = options.maxPixels ?? DEFAULT_MAX_PIXELS;
    this.feeder = new StreamFeeder(
      this.stream(),
      () => undefined,
      (error) => {
        this.failure = error instanceof ReplayDecodeError ? error : decodeError(error.message);
      },
    );
  }

  /** Server bytes, in order. Throws ReplayDecodeError once the stream turned out malformed. */
  push(chunk: Buffer): void {
    if (this.failure) throw this.failure;
    this.feeder.push(chunk);
    if (this.failure) throw this.failure;
  }

  /** A client SetPixelFormat (its 16-byte PIXEL_FORMAT); the server uses it from its next message on. */
  setPixelFormat(format: Buffer): void {
    if (format.length !== 16) throw decodeError(`a pixel format is 16 bytes, not ${format.length}`);
    const pf = parsePixelFormat(format);
    checkPixelFormat(pf);
    this.pendingFormat = pf;
  }

  /** True once ServerInit was decoded. */
  get initialized(): boolean {
    return this.initDone;
  }

  get width(): number {
    return this.fbWidth;
  }

  get height(): number {
    return this.fbHeight;
  }

  get name(): string {
    return this.desktopName;
  }

  get pixelFormat(): PixelFormat | undefined {
    return this.decoder?.format;
  }

  /**
   * Grows whenever what a frame shows changes: the framebuffer's pixels or size, the cursor's shape or the pointer's
   * position (lets a caller skip re-rendering an unchanged frame).
   */
  get changes(): number {
    return this.changeCount;
  }

  /** The live framebuffer (not a copy: it changes with the next push). */
  get framebuffer(): ReplayImage {
    return { width: this.fbWidth, height: this.fbHeight, data: this.fbData };
  }

  /** The current cursor shape, when the server sent one (undefined also when it hid the cursor). */
  get cursor(): ReplayCursor | undefined {
    return this.cursorShape;
  }

  /** Pointer position: the browser's last PointerEvent (pointerMoved), or the PointerPos pseudo-encoding's. */
  get pointerPosition(): { x: number; y: number } | undefined {
    return this.pointer;
  }

  /** The browser moved the pointer (a capture's Pointer record). */
  pointerMoved(x: number, y: number): void {
    this.pointer = { x, y };
    this.changeCount++;
  }

  // ------------------------------------------------------------------ framebuffer

  private checkSize(width: number, height: number, what: string): void {
    if (width * height > this.maxPixels) throw decodeError(`${what} ${width}x${height} exceeds ${this.maxPixels} pixels`);
  }

  /** New size; the overlapping part of the old picture stays (as a browser canvas resize keeps it). */
  private resize(width: number, height: number): void {
    this.checkSize(width, height, 'framebuffer');
    const buffer = new ArrayBuffer(width * height * 4);
    const pixels = new Uint32Array(buffer).fill(BLACK);
    const keepWidth = Math.min(width, this.fbWidth);
    for (let y = 0; y < Math.min(height, this.fbHeight); y++) {
      pixels.set(this.pixels.subarray(y * this.fbWidth, y * this.fbWidth + keepWidth), y * width);
    }
    this.fbWidth = width;
    this.fbHeight = height;
    this.pixels = pixels;
    this.fbData = Buffer.from(buffer);
    this.changeCount++;
  }

  private checkRect(x: number, y: number, width: number, height: number, encoding: number): void {
    if (x + width > this.fbWidth || y + height > this.fbHeight) {
      throw decodeError(`rectangle ${width}x${height}+${x}+${y} (encoding ${encoding}) outside the ${this.fbWidth}x${this.fbHeight} framebuffer`);
    }
  }

  private fill(x: number, y: number, width: number, height: number, rgba: number): void {
    for (let row = 0; row < height; row++) {
      const start = (y + row) * this.fbWidth + x;
      this.pixels.fill(rgba, start, start + width);
    }
  }

  private get pixelDecoder(): PixelDecoder {
    if (!this.decoder) throw decodeError('pixels before ServerInit');
    return this.decoder;
  }

  // ------------------------------------------------------------------ stream

  private *stream(): ParserGenerator {
    const init = yield* readServerInit();
    checkPixelFormat(init.pixelFormat);
    this.desktopName = init.name;
    this.decoder = new PixelDecoder(init.pixelFormat, this.colourMap);
    this.resize(init.width, init.height);
    this.initDone = true;

    for (;;) {
      const type = (yield* read(1))[0];
      if (this.pendingFormat) {
        this.decoder = new PixelDecoder(this.pendingFormat, this.colourMap);
        this.pendingFormat = undefined;
      }
      switch (type) {
        case ServerMessage.FramebufferUpdate:
          yield* this.framebufferUpdate();
          break;
        case ServerMessage.SetColourMapEntries: {
          const { first, count } = yield* readColourMapHeader();
          if (first + count > 65536) throw decodeError(`SetColourMapEntries ${first}+${count} beyond 65536 entries`);
          this.colourMap.set(first, yield* read(6 * count));
          this.changeCount++; // colour-mapped pixels already drawn keep their colours; only new ones use the map
          break;
        }
        case ServerMessage.Bell:
          this.stats.bells++;
          break;
        case ServerMessage.ServerCutText: {
          const { bytes, extended } = yield* readCutTextHeader();
          if (extended) throw decodeError('extended clipboard message, which the gateway never negotiates');
          yield* skip(bytes); // streamed past, never buffered
          break;
        }
        // Continuous updates and fences (a browser on TigerVNC's Xvnc asks for them): nothing to draw.
        case ServerMessage.EndOfContinuousUpdates:
          break;
        case ServerMessage.Fence:
          yield* readFence();
          break;
        default:
          throw decodeError(`unknown server message type ${type}`);
      }
    }
  }

  private *framebufferUpdate(): ParserGenerator {
    const count = yield* readUpdateHeader();
    this.stats.updates++;
    // As browsers do: the count is taken literally, and a LastRect (sent with count 0xFFFF) ends the update early.
    for (let i = 0; i < count; i++) {
      const { x, y, width, height, encoding } = yield* readRectHeader();
      this.stats.rects++;
      this.stats.encodings.set(encoding, (this.stats.encodings.get(encoding) ?? 0) + 1);
      if (encoding === Encoding.LastRect) return;
      yield* this.rect(x, y, width, height, encoding);
    }
  }

  private *rect(x: number, y: number, width: number, height: number, encoding: number): ParserGenerator {
    switch (encoding) {
      case Encoding.Raw: {
        this.checkRect(x, y, width, height, encoding);
        const decoder = this.pixelDecoder;
        const size = decoder.bytesPerPixel;
        // Row by row: a full-screen Raw rect is never held twice.
        for (let row = 0; row < height; row++) {
          const data = yield* read(width * size);
          decoder.readRun(data, 0, width, 'pixel', this.pixels, (y + row) * this.fbWidth + x);
        }
        this.changeCount++;
        return;
      }
      case Encoding.CopyRect: {
        this.checkRect(x, y, width, height, encoding);
        const source = yield* read(4);
        const sx = source.readUInt16BE(0);
        const sy = source.readUInt16BE(2);
        this.checkRect(sx, sy, width, height, encoding);
        this.copyRect(sx, sy, x, y, width, height);
        this.changeCount++;
        return;
      }
      case Encoding.Tight:
        this.checkRect(x, y, width, height, encoding);
        yield* this.tight(x, y, width, height);
        this.changeCount++;
        return;
      case Encoding.ZRLE:
        this.checkRect(x, y, width, height, encoding);
        yield* this.zrle(x, y, width, height);
        this.changeCount++;
        return;
      case Encoding.DesktopSize:
        this.resize(width, height);
        return;
      case Encoding.ExtendedDesktopSize: {
        const screens = (yield* read(4))[0]; // number of screens, 3 padding
        yield* skip(16 * screens);
        // y is the status: 0 for a server-initiated or a successful client-requested change.
        if (y === 0) this.resize(width, height);
        return;
      }
      case Encoding.PointerPos:
        this.pointer = { x, y };
        this.changeCount++;
        this.changeCount++;
        return;
      case Encoding.QemuExtendedKeyEvent:
        return;
      case Encoding.QemuLedState:
        yield* skip(1);
        return;
      case Encoding.DesktopName:
        this.desktopName = (yield* readDesktopName()).name;
        return;
      case Encoding.Cursor:
        yield* this.richCursor(x, y, width, height);
        this.changeCount++;
        return;
      case Encoding.XCursor:
        yield* this.xCursor(x, y, width, height);
        this.changeCount++;
        return;
      default:
        throw decodeError(`rectangle with encoding ${encoding}, which the stream gateway never negotiates`);
    }
  }

  private copyRect(sx: number, sy: number, x: number, y: number, width: number, height: number): void {
    const stride = this.fbWidth;
    const px = this.pixels;
    // Overlapping source and destination: copy rows in the direction that never reads an overwritten row.
    if (sy < y) {
      for (let row = height - 1; row >= 0; row--) px.copyWithin((y + row) * stride + x, (sy + row) * stride + sx, (sy + row) * stride + sx + width);
    } else {
      for (let row = 0; row < height; row++) px.copyWithin((y + row) * stride + x, (sy + row) * stride + sx, (sy + row) * stride + sx + width);
    }
  }

  // ------------------------------------------------------------------ cursors

  private *richCursor(hotX: number, hotY: number, width: number, height: number): ParserGenerator {
    this.checkSize(width, height, 'cursor');
    const decoder = this.pixelDecoder;
    const pixelBytes = width * height * decoder.bytesPerPixel;
    const maskStride = Math.floor((width + 7) / 8);
    const data = yield* read(pixelBytes + maskStride * height);
    if (width === 0 || height === 0) {
      this.cursorShape = undefined;
      this.changeCount++;
      return;
    }
    const buffer = new ArrayBuffer(width * height * 4);
    const out = new Uint32Array(buffer);
    decoder.readRun(data, 0, width * height, 'pixel', out, 0);
    const image = Buffer.from(buffer);
    for (let row = 0; row < height; row++) {
      for (let col = 0; col < width; col++) {
        const opaque = (data[pixelBytes + row * maskStride + (col >> 3)] >> (7 - (col & 7))) & 1;
        image[(row * width + col) * 4 + 3] = opaque ? 255 : 0;
      }
    }
    this.cursorShape = { width, height, hotX, hotY, data: image };
    this.changeCount++;
  }

  private *xCursor(hotX: number, hotY: number, width: number, height: number): ParserGenerator {
    if (width === 0 || height === 0) {
      this.cursorShape = undefined;
      this.changeCount++;
      return;
    }
    this.checkSize(width, height, 'cursor');
    const stride = Math.floor((width + 7) / 8);
    const data = yield* read(6 + 2 * stride * height); // fg RGB, bg RGB, bitmap, mask
    const image = Buffer.alloc(width * height * 4);
    const maskStart = 6 + stride * height;
    for (let row = 0; row < height; row++) {
      for (let col = 0; col < width; col++) {
        const bit = (start: number) => (data[start + row * stride + (col >> 3)] >> (7 - (col & 7))) & 1;
        const colour = bit(6) ? 0 : 3;
        const o = (row * width + col) * 4;
        image[o] = data[colour];
        image[o + 1] = data[colour + 1];
        image[o + 2] = data[colour + 2];
        image[o + 3] = bit(maskStart) ? 255 : 0;
      }
    }
    this.cursorShape = { width, height, hotX, hotY, data: image };
    this.changeCount++;
  }

  // ------------------------------------------------------------------ Tight

  private *tight(x: number, y: number, width: number, height: number): ParserGenerator {
    const decoder = this.pixelDecoder;
    const tpixel = decoder.tightPixelBytes;
    const head = yield* readTightHead(width, height, tpixel);
    for (let i = 0; i < 4; i++) if (head.control & (1 << i)) this.tightStreams[i].reset();
    if (head.kind === 'fill') {
      const colour = yield* read(tpixel);
      this.fill(x, y, width, height, decoder.read(colour, 0, 'tight'));
      return;
    }
    if (head.kind === 'jpeg') {
      this.drawJpeg(yield* read(head.length), x, y, width, height);
      return;
    }
    let palette: Uint32Array | undefined;
    if (head.filter === TightFilter.Palette) {
      const entries = yield* read(head.colours * tpixel);
      palette = new Uint32Array(head.colours);
      decoder.readRun(entries, 0, head.colours, 'tight', palette, 0);
    }
    const { length, compressed } = yield* readTightData(head.dataSize);
    let data = yield* read(length);
    if (compressed) {
      data = this.tightStreams[head.stream].inflate(data, head.dataSize);
      if (data.length !== head.dataSize) throw decodeError(`Tight data inflated to ${data.length} bytes, expected ${head.dataSize}`);
    }
    if (palette) this.drawPalette(data, palette, x, y, width, height);
    else if (head.filter === TightFilter.Gradient) this.drawGradient(data, x, y, width, height);
    else {
      for (let row = 0; row < height; row++) decoder.readRun(data, row * width * tpixel, width, 'tight', this.pixels, (y + row) * this.fbWidth + x);
    }
  }

  private drawJpeg(jpeg: Buffer, x: number, y: number, width: number, height: number): void {
    let image: { width: number; height: number; data: Uint8Array };
    try {
      // The image must be exactly the rectangle: a header claiming more is refused before jpeg-js allocates for it.
      image = decodeJpeg(jpeg, {
        useTArray: true,
        formatAsRGBA: true,
        maxResolutionInMP: (width * height + 1) / 1e6,
        maxMemoryUsageInMB: Math.ceil((width * height * 32) / 2 ** 20) + 32,
      });
    } catch (error) {
      throw decodeError(`Tight JPEG rectangle does not decode: ${(error as Error).message}`);
    }
    if (image.width !== width || image.height !== height) throw decodeError(`Tight JPEG of ${image.width}x${image.height} in a ${width}x${height} rectangle`);
    const src = new Uint32Array(image.data.buffer, image.data.byteOffset, width * height);
    for (let row = 0; row < height; row++) this.pixels.set(src.subarray(row * width, (row + 1) * width), (y + row) * this.fbWidth + x);
    // jpeg-js writes alpha 255 already; the packed words are R, G, B, A in memory as the framebuffer's.
    this.stats.jpegRects++;
  }

  private drawPalette(data: Buffer, palette: Uint32Array, x: number, y: number, width: number, height: number): void {
    if (palette.length === 2) {
      const stride = Math.floor((width + 7) / 8);
      for (let row = 0; row < height; row++) {
        const dst = (y + row) * this.fbWidth + x;
        for (let col = 0; col < width; col++) this.pixels[dst + col] = palette[(data[row * stride + (col >> 3)] >> (7 - (col & 7))) & 1];
      }
      return;
    }
    for (let row = 0; row < height; row++) {
      const dst = (y + row) * this.fbWidth + x;
      for (let col = 0; col < width; col++) {
        const index = data[row * width + col];
        if (index >= palette.length) throw decodeError(`Tight palette index ${index} with ${palette.length} colours`);
        this.pixels[dst + col] = palette[index];
      }
    }
  }

  /** Tight gradient filter: each component is predicted as left + above - above-left, clamped to 0..max. */
  private drawGradient(data: Buffer, x: number, y: number, width: number, height: number): void {
    const decoder = this.pixelDecoder;
    if (!decoder.format.trueColour && decoder.tightPixelBytes !== 3) throw decodeError('Tight gradient filter on a colour-mapped pixel format');
    const tpixel = decoder.tightPixelBytes;
    const max = decoder.componentMax();
    let above = new Int32Array(width * 3);
    let current = new Int32Array(width * 3);
    const diff = new Int32Array(3);
    for (let row = 0; row < height; row++) {
      const dst = (y + row) * this.fbWidth + x;
      for (let col = 0; col < width; col++) {
        decoder.components(data, (row * width + col) * tpixel, diff);
        for (let c = 0; c < 3; c++) {
          let predicted: number;
          if (col === 0) predicted = above[c];
          else {
            predicted = above[col * 3 + c] + current[(col - 1) * 3 + c] - above[(col - 1) * 3 + c];
            if (predicted > max[c]) predicted = max[c];
            else if (predicted < 0) predicted = 0;
          }
          current[col * 3 + c] = (diff[c] + predicted) & max[c];
        }
        this.pixels[dst + col] = decoder.fromComponents(current[col * 3], current[col * 3 + 1], current[col * 3 + 2]);
      }
      [above, current] = [current, above];
    }
  }

  // ------------------------------------------------------------------ ZRLE

  private *zrle(x: number, y: number, width: number, height: number): ParserGenerator {
    const decoder = this.pixelDecoder;
    const cpixel = decoder.zrlePixelBytes;
    const tiles = Math.ceil(width / ZRLE_TILE) * Math.ceil(height / ZRLE_TILE);
    // The most a legitimate rectangle inflates to: every pixel as an RLE run of one (CPIXEL + 1 length byte) and
    // every tile with a subencoding byte and a full 127-colour palette.
    const maxInflated = width * height * (cpixel + 1) + tiles * (1 + 127 * cpixel);
    const length = (yield* read(4)).readUInt32BE(0);
    // deflate expands incompressible data by 5 bytes per 16 KiB stored block; sync-flush markers add a few more.
    if (length > maxInflated + Math.ceil(maxInflated / 1000) + 1024) throw decodeError(`ZRLE rectangle ${width}x${height} with ${length} bytes of zlib data`);
    const data = this.zrleStream.inflate(yield* read(length), maxInflated);
    let at = 0;
    const need = (n: number) => {
      if (at + n > data.length) throw decodeError(`ZRLE data ends inside a ${width}x${height} rectangle`);
    };
    /** ZRLE run length: bytes summed until one is not 255, plus one. */
    const runLength = () => {
      let run = 1;
      for (;;) {
        need(1);
        const b = data[at++];
        run += b;
        if (b !== 255) return run;
      }
    };
    const palette = new Uint32Array(128);
    const px = this.pixels;
    const stride = this.fbWidth;
    for (let ty = 0; ty < height; ty += ZRLE_TILE) {
      const th = Math.min(ZRLE_TILE, height - ty);
      for (let tx = 0; tx < width; tx += ZRLE_TILE) {
        const tw = Math.min(ZRLE_TILE, width - tx);
        const origin = (y + ty) * stride + x + tx;
        need(1);
        const sub = data[at++];
        if (sub === 0) {
          need(tw * th * cpixel);
          for (let row = 0; row < th; row++) decoder.readRun(data, at + row * tw * cpixel, tw, 'zrle', px, origin + row * stride);
          at += tw * th * cpixel;
        } else if (sub === 1) {
          need(cpixel);
          const colour = decoder.read(data, at, 'zrle');
          at += cpixel;
          for (let row = 0; row < th; row++) px.fill(colour, origin + row * stride, origin + row * stride + tw);
        } else if (sub <= 16) {
          need(sub * cpixel);
          decoder.readRun(data, at, sub, 'zrle', palette, 0);
          at += sub * cpixel;
          const bits = sub === 2 ? 1 : sub <= 4 ? 2 : 4;
          const rowBytes = Math.ceil((tw * bits) / 8);
          need(rowBytes * th);
          const mask = (1 << bits) - 1;
          for (let row = 0; row < th; row++) {
            for (let col = 0; col < tw; col++) {
              const bit = col * bits;
              const index = (data[at + (bit >> 3)] >> (8 - bits - (bit & 7))) & mask;
              if (index >= sub) throw decodeError(`ZRLE packed palette index ${index} with ${sub} colours`);
              px[origin + row * stride + col] = palette[index];
            }
            at += rowBytes;
          }
        } else if (sub === 128 || sub >= 130) {
          const paletteSize = sub === 128 ? 0 : sub - 128;
          if (paletteSize) {
            need(paletteSize * cpixel);
            decoder.readRun(data, at, paletteSize, 'zrle', palette, 0);
            at += paletteSize * cpixel;
          }
          const total = tw * th;
          for (let done = 0; done < total; ) {
            let colour: number;
            let run = 1;
            if (paletteSize) {
              need(1);
              const index = data[at++];
              if ((index & 0x7f) >= paletteSize) throw decodeError(`ZRLE palette RLE index ${index & 0x7f} with ${paletteSize} colours`);
              colour = palette[index & 0x7f];
              if (index & 0x80) run = runLength();
            } else {
              need(cpixel);
              colour = decoder.read(data, at, 'zrle');
              at += cpixel;
              run = runLength();
            }
            if (done + run > total) throw decodeError(`ZRLE run of ${run} beyond a ${tw}x${th} tile`);
            for (let i = done; i < done + run; i++) px[origin + Math.floor(i / tw) * stride + (i % tw)] = colour;
            done += run;
          }
        } else {
          throw decodeError(`ZRLE tile subencoding ${sub}`);
        }
      }
    }
    if (at !== data.length) throw decodeError(`${data.length - at} bytes left over after a ZRLE rectangle`);
  }
}
