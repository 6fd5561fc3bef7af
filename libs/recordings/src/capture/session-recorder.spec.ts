import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileObjectStore, ObjectStore } from '@ws/storage';
import { CaptureRecord, CaptureRecordKind, readCaptureRecords, segmentKey } from '../capture-format';
import type { CaptureOutcome } from './capture-rows';
import { UploadSegment, uploadInProcess } from './segment-uploader';
import { RecorderRows, SessionRecorder } from './session-recorder';

/** The row as the recorder sees it: counts and a finish, like CaptureRows over one `recording` row. */
class RowLedger implements RecorderRows {
  stored: Array<[number, number]> = [];
  touches = 0;
  finished: CaptureOutcome | null = null;
  alive = true;

  async segmentStored(_id: string, count: number, bytes: number): Promise<boolean> {
    this.stored.push([count, bytes]);
    return this.alive;
  }

  async touch(): Promise<boolean> {
    this.touches++;
    return this.alive;
  }

  async finish(_id: string, outcome: CaptureOutcome): Promise<boolean> {
    this.finished = outcome;
    return true;
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function records(store: ObjectStore, prefix: string, count: number): Promise<CaptureRecord[]> {
  const out: CaptureRecord[] = [];
  async function* segments() {
    for (let i = 0; i < count; i++) yield await store.get(segmentKey(prefix, i));
  }
  for await (const record of readCaptureRecords(segments())) out.push({ ...record, payload: Buffer.from(record.payload) });
  return out;
}

describe('SessionRecorder', () => {
  let scratch: string;
  let store: FileObjectStore;
  let spoolDir: string;
  const warnings: string[] = [];

  beforeEach(() => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-recorder-'));
    store = new FileObjectStore(join(scratch, 'store'), { publicBaseUrl: 'http://127.0.0.1' });
    spoolDir = join(scratch, 'spool', 'rec');
    mkdirSync(spoolDir, { recursive: true });
    warnings.length = 0;
  });
  afterEach(() => rmSync(scratch, { recursive: true, force: true }));

  function recorder(rows: RowLedger, options: { upload?: UploadSegment; rowCreated?: Promise<void>; segmentBytes?: number; segmentMs?: number } = {}) {
    return new SessionRecorder({
      id: 'rec', capturePrefix: 'recordings/w/rec/capture', spoolDir, startedAt: new Date(1_000_000), upload: options.upload ?? uploadInProcess(store), rows,
      rowCreated: options.rowCreated ?? Promise.resolve(),
      limits: { segmentBytes: options.segmentBytes ?? 1 << 20, segmentMs: options.segmentMs ?? 60_000, maxSpoolBacklogBytes: 64 << 20, maxPendingSegments: 8 },
      log: { warn: (m) => warnings.push(m) },
    });
  }

  it('copies each chunk (the caller reuses its buffer), closes segments by size, and ends with End', async () => {
    const rows = new RowLedger();
    const r = recorder(rows, { segmentBytes: 100 });
    const chunk = Buffer.from('ServerInit+name');
    r.serverChunk(chunk);
    chunk.fill(0); // a pooled read buffer, reused at once
    r.pixelFormat(Buffer.alloc(16, 1));
    for (let i = 0; i < 20; i++) r.serverChunk(Buffer.alloc(30, i));
    await r.end();
    expect(rows.finished).toMatchObject({ segmentCount: rows.stored.length, error: null });
    expect(rows.stored.length).toBeGreaterThan(3);
    const all = await records(store, 'recordings/w/rec/capture', rows.stored.length);
    expect(all[0]).toMatchObject({ kind: CaptureRecordKind.Server, payload: Buffer.from('ServerInit+name') });
    expect(all[1]).toMatchObject({ kind: CaptureRecordKind.PixelFormat, payload: Buffer.alloc(16, 1) });
    expect(all.slice(2, -1).map((x) => x.payload)).toEqual(Array.from({ length: 20 }, (_, i) => Buffer.alloc(30, i)));
    expect(all[all.length - 1].kind).toBe(CaptureRecordKind.End);
    expect(rows.finished?.captureBytes).toBe(rows.stored[rows.stored.length - 1][1]);
    expect(existsSync(spoolDir)).toBe(false);
  });

  it('records pointer positions, not a repeat of the same one', async () => {
    const rows = new RowLedger();
    const r = recorder(rows);
    r.serverChunk(Buffer.from('ServerInit'));
    for (const [x, y] of [[5, 6], [5, 6], [7, 6], [65535, 0]]) r.pointer(x, y);
    await r.end();
    const all = await records(store, 'recordings/w/rec/capture', rows.stored.length);
    expect(all.filter((x) => x.kind === CaptureRecordKind.Pointer).map((x) => [x.payload.readUInt16BE(0), x.payload.readUInt16BE(2)])).toEqual([[5, 6], [7, 6], [65535, 0]]);
  });

  it('closes a segment by age, and refreshes the row while there is nothing to close', async () => {
    const rows = new RowLedger();
    const r = recorder(rows, { segmentMs: 20 });
    r.serverChunk(Buffer.from('first'));
    await until('the segment closed by age', () => rows.stored.length === 1);
    await until('a refresh of an idle recording', () => rows.touches > 0);
    r.serverChunk(Buffer.from('second'));
    await r.end();
    const all = await records(store, 'recordings/w/rec/capture', rows.stored.length);
    expect(all.map((x) => x.payload.toString())).toEqual(['first', 'second', '']);
  });

  it('a failing store stops the recording with what was stored; later chunks are ignored', async () => {
    const rows = new RowLedger();
    const failing: UploadSegment = async () => {
      throw new Error('store unavailable');
    };
    const r = recorder(rows, { upload: failing, segmentBytes: 50 });
    r.serverChunk(Buffer.alloc(60));
    await r.closed;
    expect(r.recording).toBe(false);
    expect(rows.finished).toMatchObject({ segmentCount: 0, error: 'the recording stopped early: storing segment 0: store unavailable' });
    r.serverChunk(Buffer.alloc(60)); // the stream goes on; the recorder takes nothing more
    await r.end();
    expect(existsSync(spoolDir)).toBe(false);
    expect(warnings.join('\n')).toMatch(/store unavailable/);
  });

  it('a row that could not be created stops the recording and nothing is uploaded', async () => {
    const rows = new RowLedger();
    let uploads = 0;
    const r = recorder(rows, { rowCreated: Promise.reject(new Error('database down')), upload: async () => ({ size: ++uploads }) });
    r.serverChunk(Buffer.alloc(10));
    await r.closed;
    await r.end();
    expect(uploads).toBe(0);
    expect(rows.finished).toBeNull();
    expect(existsSync(spoolDir)).toBe(false);
  });

  it('a row finalized elsewhere (finalizeAbandoned) is left alone', async () => {
    const rows = new RowLedger();
    rows.alive = false;
    const r = recorder(rows, { segmentBytes: 20 });
    r.serverChunk(Buffer.alloc(30));
    await r.closed;
    expect(rows.stored).toHaveLength(1);
    expect(rows.finished).toBeNull();
  });

  it('a spool file that vanished is a failed upload, not an unhandled stream error', async () => {
    await expect(uploadInProcess(store)('k/segment-000000.wsrc', join(spoolDir, 'gone.wsrc'))).rejects.toThrow(/ENOENT/);
  });

  it('a session that ends before its first frame stores nothing', async () => {
    const rows = new RowLedger();
    const r = recorder(rows);
    r.pixelFormat(Buffer.alloc(16));
    await r.end();
    expect(rows.finished).toMatchObject({ segmentCount: 0, error: 'the session ended before the desktop sent anything' });
    expect(rows.stored).toEqual([]);
  });
});
