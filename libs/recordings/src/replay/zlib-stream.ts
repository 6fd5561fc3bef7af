/**
 * One persistent zlib stream of an RFB connection (Tight has four, ZRLE one), inflated synchronously.
 *
 * Node's inflateSync is stateless, but the only state a deflate stream carries from one rectangle to the next is
 * its 32 KiB history window: every RFB server ends each rectangle's data with Z_SYNC_FLUSH (it has to, for the
 * client to decode the rectangle from exactly the bytes sent), which closes the current deflate block and aligns
 * the stream to a byte. So each rectangle's data is a sequence of whole raw-deflate blocks that inflateRawSync
 * decodes given the stream's last 32 KiB of output as its dictionary. A sender that left a block open across
 * rectangles would make this throw (never silently decode garbage), not hang.
 */
import { constants, inflateRawSync } from 'node:zlib';
import { ReplayDecodeError } from './errors';

const WINDOW_BYTES = 32 * 1024;

export class ZlibStream {
  private window: Buffer = Buffer.alloc(0);
  /** The 2-byte zlib header (RFC 1950) still to come at the start of the stream. */
  private header: number[] = [];
  private headerDone = false;

  constructor(private readonly name: string) {}

  /** Starts a new zlib stream (Tight's reset bits). */
  reset(): void {
    this.window = Buffer.alloc(0);
    this.header = [];
    this.headerDone = false;
  }

  /**
   * Inflates the next piece of the stream; throws ReplayDecodeError on corrupt data or when it would produce more
   * than `maxOutput` bytes (memory stays bounded by what the rectangle can legitimately need).
   */
  inflate(input: Buffer, maxOutput: number): Buffer {
    let data = input;
    while (!this.headerDone && data.length > 0) {
      this.header.push(data[0]);
      data = data.subarray(1);
      if (this.header.length === 2) this.checkHeader();
    }
    if (data.length === 0) return Buffer.alloc(0);
    let out: Buffer;
    try {
      out = inflateRawSync(data, {
        finishFlush: constants.Z_SYNC_FLUSH,
        maxOutputLength: Math.max(1, maxOutput),
        ...(this.window.length > 0 ? { dictionary: this.window } : {}),
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ERR_BUFFER_TOO_LARGE') throw new ReplayDecodeError(`${this.name} zlib data inflates to more than ${maxOutput} bytes`);
      throw new ReplayDecodeError(`${this.name} zlib data is corrupt: ${(error as Error).message}`);
    }
    if (out.length > maxOutput) throw new ReplayDecodeError(`${this.name} zlib data inflates to more than ${maxOutput} bytes`);
    if (out.length >= WINDOW_BYTES) this.window = Buffer.from(out.subarray(out.length - WINDOW_BYTES));
    else if (out.length > 0) {
      const joined = Buffer.concat([this.window, out]);
      this.window = joined.length > WINDOW_BYTES ? Buffer.from(joined.subarray(joined.length - WINDOW_BYTES)) : joined;
    }
    return out;
  }

  private checkHeader(): void {
    const [cmf, flg] = this.header;
    if ((cmf & 0x0f) !== 8 || cmf >> 4 > 7 || ((cmf << 8) | flg) % 31 !== 0) {
      throw new ReplayDecodeError(`${this.name} zlib stream has an invalid header 0x${cmf.toString(16)} 0x${flg.toString(16)}`);
    }
    if (flg & 0x20) throw new ReplayDecodeError(`${this.name} zlib stream asks for a preset dictionary`);
    this.headerDone = true;
  }
}
