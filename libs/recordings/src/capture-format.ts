import type { Readable } from 'node:stream';

/**
 * The stream gateway's raw capture of a session, stored as numbered segment objects (see segmentKey). Each segment
 * starts with CAPTURE_MAGIC and holds whole records; a record never spans two segments:
 *
 *   u8 kind | u32 BE milliseconds since the recording started | u32 BE payload length | payload
 *
 * What the workspace sends is kept, and where the owner's pointer is (never their keystrokes): the server's bytes
 * from ServerInit on, as the browser received them, the pixel format the browser asked for (it changes how the server
 * encodes), and the pointer positions the browser sent (the video draws the pointer there).
 */
export const CAPTURE_MAGIC = Buffer.from('WSRC\x01', 'latin1');
export const RECORD_HEADER_BYTES = 9;

export const CaptureRecordKind = {
  /** Bytes of the RFB server → client stream, starting at ServerInit. */
  Server: 1,
  /** The 16-byte pixel format of a client SetPixelFormat; applies from the next server message on. */
  PixelFormat: 2,
  /** The session ended here (written once, last). */
  End: 3,
  /** The browser moved the pointer: u16 BE x, u16 BE y (a PointerEvent's position; buttons are not kept). */
  Pointer: 4,
} as const;
export type CaptureRecordKind = (typeof CaptureRecordKind)[keyof typeof CaptureRecordKind];

export interface CaptureRecord {
  kind: CaptureRecordKind;
  /** Milliseconds since the recording started. */
  at: number;
  payload: Buffer;
}

/** Whether `kind` is one of the record kinds (a reader stops at any other). */
export function isCaptureRecordKind(kind: number): kind is CaptureRecordKind {
  return kind === CaptureRecordKind.Server || kind === CaptureRecordKind.PixelFormat || kind === CaptureRecordKind.End || kind === CaptureRecordKind.Pointer;
}

/** Writes the 9-byte header of a record whose payload is `length` bytes into `header` (reused on the hot path). */
export function writeRecordHeader(header: Buffer, kind: CaptureRecordKind, at: number, length: number): Buffer {
  header.writeUInt8(kind, 0);
  header.writeUInt32BE(Math.max(0, Math.min(0xffffffff, Math.floor(at))), 1);
  header.writeUInt32BE(length, 5);
  return header;
}

/** The 9-byte header of a record whose payload is `length` bytes. */
export function recordHeader(kind: CaptureRecordKind, at: number, length: number): Buffer {
  return writeRecordHeader(Buffer.allocUnsafe(RECORD_HEADER_BYTES), kind, at, length);
}

/** Key of segment `index` (0-based) of a recording under `prefix`; zero-padded so listing order is segment order. */
export function segmentKey(prefix: string, index: number): string {
  return `${prefix}/segment-${String(index).padStart(6, '0')}.wsrc`;
}

export class CaptureFormatError extends Error {}

/**
 * Largest record payload the reader accepts. The gateway writes one record per chunk it received (tens of KiB);
 * the bound keeps a corrupt length from making the reader buffer a whole segment or more.
 */
export const MAX_RECORD_PAYLOAD_BYTES = 64 * 1024 * 1024;

/** One whole record (header and payload), as a segment stores it. */
export function encodeCaptureRecord(kind: CaptureRecordKind, at: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([recordHeader(kind, at, payload.length), payload]);
}

/** Chunks of one segment not yet cut into records: a list, so a large record costs one copy, not one per chunk. */
class ChunkQueue {
  private chunks: Buffer[] = [];
  private head = 0;
  /** Offset into chunks[head]. */
  private offset = 0;
  length = 0;

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** The next n bytes (n <= length), consumed; a view when they lie in one chunk, else one copy. */
  take(n: number): Buffer {
    const first = this.chunks[this.head];
    if (n === 0) return Buffer.alloc(0);
    let out: Buffer;
    if (first.length - this.offset >= n) {
      out = first.subarray(this.offset, this.offset + n);
      this.offset += n;
    } else {
      out = Buffer.allocUnsafe(n);
      let filled = 0;
      while (filled < n) {
        const chunk = this.chunks[this.head];
        const step = Math.min(n - filled, chunk.length - this.offset);
        chunk.copy(out, filled, this.offset, this.offset + step);
        filled += step;
        this.offset += step;
        if (this.offset === chunk.length) this.dropHead();
      }
    }
    if (this.head < this.chunks.length && this.offset === this.chunks[this.head].length) this.dropHead();
    this.length -= n;
    return out;
  }

  /** Looks at the next n bytes without consuming them (n small). */
  peek(n: number): Buffer {
    const first = this.chunks[this.head];
    if (first.length - this.offset >= n) return first.subarray(this.offset, this.offset + n);
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    for (let i = this.head, offset = this.offset; filled < n; i++, offset = 0) {
      const step = Math.min(n - filled, this.chunks[i].length - offset);
      this.chunks[i].copy(out, filled, offset, offset + step);
      filled += step;
    }
    return out;
  }

  private dropHead(): void {
    this.head++;
    this.offset = 0;
    if (this.head > 64 && this.head * 2 > this.chunks.length) {
      this.chunks.splice(0, this.head);
      this.head = 0;
    }
  }
}

/**
 * The records of a capture, segment after segment, read as a stream (a segment is never held whole in memory
 * beyond one record). Throws CaptureFormatError on a bad magic, an unknown record kind, an oversized or a
 * truncated record.
 */
export async function* readCaptureRecords(segments: AsyncIterable<Readable> | Iterable<Readable>): AsyncGenerator<CaptureRecord> {
  let index = 0;
  for await (const segment of segments) {
    const pending = new ChunkQueue();
    let magicSeen = false;
    for await (const chunk of segment as AsyncIterable<Buffer>) {
      pending.push(chunk);
      if (!magicSeen) {
        if (pending.length < CAPTURE_MAGIC.length) continue;
        if (!pending.take(CAPTURE_MAGIC.length).equals(CAPTURE_MAGIC)) throw new CaptureFormatError(`segment ${index} is not a capture segment`);
        magicSeen = true;
      }
      while (pending.length >= RECORD_HEADER_BYTES) {
        const header = pending.peek(RECORD_HEADER_BYTES);
        const kind = header.readUInt8(0);
        if (!isCaptureRecordKind(kind)) throw new CaptureFormatError(`segment ${index}: unknown record kind ${kind}`);
        const length = header.readUInt32BE(5);
        if (length > MAX_RECORD_PAYLOAD_BYTES) throw new CaptureFormatError(`segment ${index}: record of ${length} bytes (at most ${MAX_RECORD_PAYLOAD_BYTES})`);
        if (pending.length < RECORD_HEADER_BYTES + length) break;
        const at = header.readUInt32BE(1);
        pending.take(RECORD_HEADER_BYTES);
        yield { kind, at, payload: pending.take(length) };
      }
    }
    if (!magicSeen || pending.length > 0) throw new CaptureFormatError(`segment ${index} ends inside a record`);
    index++;
  }
}
