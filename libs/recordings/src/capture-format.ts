import type { Readable } from 'node:stream';

/**
 * The stream gateway's raw capture of a session, stored as numbered segment objects (see segmentKey). Each segment
 * starts with CAPTURE_MAGIC and holds whole records; a record never spans two segments:
 *
 *   u8 kind | u32 BE milliseconds since the recording started | u32 BE payload length | payload
 *
 * Only what the workspace sends is kept (the browser's keystrokes are not): the server's bytes from ServerInit on,
 * as the browser received them, and the pixel format the browser asked for (it changes how the server encodes).
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
} as const;
export type CaptureRecordKind = (typeof CaptureRecordKind)[keyof typeof CaptureRecordKind];

export interface CaptureRecord {
  kind: CaptureRecordKind;
  /** Milliseconds since the recording started. */
  at: number;
  payload: Buffer;
}

/** The 9-byte header of a record whose payload is `length` bytes. */
export function recordHeader(kind: CaptureRecordKind, at: number, length: number): Buffer {
  const header = Buffer.allocUnsafe(RECORD_HEADER_BYTES);
  header.writeUInt8(kind, 0);
  header.writeUInt32BE(Math.max(0, Math.min(0xffffffff, Math.floor(at))), 1);
  header.writeUInt32BE(length, 5);
  return header;
}

/** Key of segment `index` (0-based) of a recording under `prefix`; zero-padded so listing order is segment order. */
export function segmentKey(prefix: string, index: number): string {
  return `${prefix}/segment-${String(index).padStart(6, '0')}.wsrc`;
}

export class CaptureFormatError extends Error {}

/**
 * The records of a capture, segment after segment, read as a stream (a segment is never held whole in memory
 * beyond one record). Throws CaptureFormatError on a bad magic or a truncated record.
 */
export async function* readCaptureRecords(segments: AsyncIterable<Readable> | Iterable<Readable>): AsyncGenerator<CaptureRecord> {
  let index = 0;
  for await (const segment of segments) {
    let pending: Buffer = Buffer.alloc(0);
    let magicSeen = false;
    for await (const chunk of segment as AsyncIterable<Buffer>) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      if (!magicSeen) {
        if (pending.length < CAPTURE_MAGIC.length) continue;
        if (!pending.subarray(0, CAPTURE_MAGIC.length).equals(CAPTURE_MAGIC)) throw new CaptureFormatError(`segment ${index} is not a capture segment`);
        pending = pending.subarray(CAPTURE_MAGIC.length);
        magicSeen = true;
      }
      while (pending.length >= RECORD_HEADER_BYTES) {
        const length = pending.readUInt32BE(5);
        if (pending.length < RECORD_HEADER_BYTES + length) break;
        const kind = pending.readUInt8(0) as CaptureRecordKind;
        if (kind !== CaptureRecordKind.Server && kind !== CaptureRecordKind.PixelFormat && kind !== CaptureRecordKind.End) {
          throw new CaptureFormatError(`segment ${index}: unknown record kind ${kind}`);
        }
        yield { kind, at: pending.readUInt32BE(1), payload: pending.subarray(RECORD_HEADER_BYTES, RECORD_HEADER_BYTES + length) };
        pending = pending.subarray(RECORD_HEADER_BYTES + length);
      }
    }
    if (!magicSeen || pending.length > 0) throw new CaptureFormatError(`segment ${index} ends inside a record`);
    index++;
  }
}
