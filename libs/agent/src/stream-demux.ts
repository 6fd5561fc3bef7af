/**
 * Splits Docker's attach/exec stream (Tty false) as it arrives: frames of an 8-byte header
 * [stream(1) 0 0 0 size(uint32 BE)] followed by `size` bytes, stream 1 = stdout, 2 = stderr (0 = stdin echo).
 * Hands each piece of a frame's body to `onData` at once (a frame may arrive in many chunks, headers split too).
 */
export class DockerFrameReader {
  private header = Buffer.alloc(8);
  private headerFill = 0;
  private frameRemaining = 0;
  private frameStream = 0;

  constructor(private readonly onData: (stream: number, data: Buffer) => void) {}

  push(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.frameRemaining === 0) {
        const take = Math.min(8 - this.headerFill, chunk.length - offset);
        chunk.copy(this.header, this.headerFill, offset, offset + take);
        this.headerFill += take;
        offset += take;
        if (this.headerFill < 8) return;
        this.headerFill = 0;
        this.frameStream = this.header[0];
        this.frameRemaining = this.header.readUInt32BE(4);
        continue;
      }
      const take = Math.min(this.frameRemaining, chunk.length - offset);
      this.onData(this.frameStream, chunk.subarray(offset, offset + take));
      this.frameRemaining -= take;
      offset += take;
    }
  }
}

/**
 * Demultiplexes Docker's attach/exec stream (Tty false, see DockerFrameReader) into stdout and stderr.
 * Keeps at most `maxBytes` of each stream; the rest is counted and dropped.
 */
export class DockerOutputCollector {
  private readonly out: Buffer[] = [];
  private readonly err: Buffer[] = [];
  private outKept = 0;
  private errKept = 0;
  /** Total bytes seen per stream (including dropped ones). */
  stdoutBytes = 0;
  stderrBytes = 0;
  private readonly frames = new DockerFrameReader((stream, data) => this.keep(stream, data));

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    this.frames.push(chunk);
  }

  private keep(stream: number, data: Buffer): void {
    if (stream === 1) {
      this.stdoutBytes += data.length;
      const room = this.maxBytes - this.outKept;
      if (room > 0) {
        const part = data.length > room ? data.subarray(0, room) : data;
        this.out.push(Buffer.from(part));
        this.outKept += part.length;
      }
    } else if (stream === 2) {
      this.stderrBytes += data.length;
      const room = this.maxBytes - this.errKept;
      if (room > 0) {
        const part = data.length > room ? data.subarray(0, room) : data;
        this.err.push(Buffer.from(part));
        this.errKept += part.length;
      }
    }
  }

  get stdoutTruncated(): boolean {
    return this.stdoutBytes > this.maxBytes;
  }

  get stderrTruncated(): boolean {
    return this.stderrBytes > this.maxBytes;
  }

  get stdout(): string {
    return decodeUtf8Prefix(Buffer.concat(this.out), this.stdoutTruncated);
  }

  get stderr(): string {
    return decodeUtf8Prefix(Buffer.concat(this.err), this.stderrTruncated);
  }
}

/** UTF-8 decode; when the buffer was cut, drop an incomplete multi-byte sequence at its end instead of emitting U+FFFD. */
export function decodeUtf8Prefix(buf: Buffer, cut: boolean): string {
  if (!cut || buf.length === 0) return buf.toString('utf8');
  // Find the start of the last character (at most 3 continuation bytes back).
  let i = buf.length - 1;
  let continuation = 0;
  while (i >= 0 && continuation < 3 && (buf[i] & 0xc0) === 0x80) {
    i--;
    continuation++;
  }
  if (i < 0) return buf.toString('utf8');
  const lead = buf[i];
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  const have = buf.length - i;
  return (have < need ? buf.subarray(0, i) : buf).toString('utf8');
}
