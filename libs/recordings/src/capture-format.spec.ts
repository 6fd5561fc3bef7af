import { Readable } from 'node:stream';
import { CAPTURE_MAGIC, CaptureFormatError, CaptureRecordKind, MAX_RECORD_PAYLOAD_BYTES, encodeCaptureRecord, readCaptureRecords, recordHeader } from './capture-format';

/** The records read, payloads as hex (jest compares large Buffers byte by byte, slowly). */
async function all(segments: Buffer[][]): Promise<{ kind: number; at: number; payload: string }[]> {
  const out: { kind: number; at: number; payload: string }[] = [];
  for await (const r of readCaptureRecords(segments.map((chunks) => Readable.from(chunks)))) out.push({ ...r, payload: r.payload.toString('hex') });
  return out;
}

/** Splits a buffer into chunks of `size` bytes. */
const chunks = (b: Buffer, size: number) => Array.from({ length: Math.ceil(b.length / size) }, (_, i) => b.subarray(i * size, (i + 1) * size));

describe('readCaptureRecords', () => {
  const big = Buffer.alloc(40_000, 7);
  const records = [
    encodeCaptureRecord(CaptureRecordKind.Server, 0, Buffer.from('hello')),
    encodeCaptureRecord(CaptureRecordKind.PixelFormat, 15, Buffer.alloc(16, 1)),
    encodeCaptureRecord(CaptureRecordKind.Server, 20, big),
    encodeCaptureRecord(CaptureRecordKind.Server, 21),
    encodeCaptureRecord(CaptureRecordKind.End, 99),
  ];
  const expected = [
    { kind: CaptureRecordKind.Server, at: 0, payload: Buffer.from('hello') },
    { kind: CaptureRecordKind.PixelFormat, at: 15, payload: Buffer.alloc(16, 1) },
    { kind: CaptureRecordKind.Server, at: 20, payload: big },
    { kind: CaptureRecordKind.Server, at: 21, payload: Buffer.alloc(0) },
    { kind: CaptureRecordKind.End, at: 99, payload: Buffer.alloc(0) },
  ].map((r) => ({ ...r, payload: r.payload.toString('hex') }));

  it.each([1, 3, 9, 4096, 1 << 20])('reads the same records from chunks of %d bytes, across segments', async (size) => {
    const first = Buffer.concat([CAPTURE_MAGIC, ...records.slice(0, 2)]);
    const second = Buffer.concat([CAPTURE_MAGIC, ...records.slice(2)]);
    expect(await all([chunks(first, size), chunks(second, size)])).toEqual(expected);
  });

  it('refuses a bad magic, an unknown kind, a truncated record and an oversized length', async () => {
    await expect(all([[Buffer.from('WSRC\x02')]])).rejects.toThrow(/segment 0 is not a capture segment/);
    await expect(all([[CAPTURE_MAGIC, Buffer.from([9, 0, 0, 0, 0, 0, 0, 0, 0])]])).rejects.toThrow(/unknown record kind 9/);
    await expect(all([[Buffer.concat([CAPTURE_MAGIC, records[0]])], [CAPTURE_MAGIC, records[0].subarray(0, 10)]])).rejects.toThrow(/segment 1 ends inside a record/);
    await expect(all([[]])).rejects.toThrow(CaptureFormatError);
    await expect(all([[CAPTURE_MAGIC, recordHeader(CaptureRecordKind.Server, 0, MAX_RECORD_PAYLOAD_BYTES + 1)]])).rejects.toThrow(/record of/);
  });
});
