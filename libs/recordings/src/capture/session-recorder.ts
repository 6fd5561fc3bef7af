import { closeSync, constants as fsConstants, createWriteStream, openSync, rmSync, WriteStream } from 'node:fs';
import { open, rm, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { finished } from 'node:stream/promises';
import type { RfbSessionRecorder } from '@ws/stream';
import { CAPTURE_MAGIC, CaptureRecordKind, RECORD_HEADER_BYTES, segmentKey, writeRecordHeader } from '../capture-format';
import type { CaptureOutcome } from './capture-rows';
import type { UploadSegment } from './segment-uploader';

export interface RecorderLimits {
  /** A segment is closed once it holds this many bytes. */
  segmentBytes: number;
  /** ... and at least this often (a tick that finds nothing to close refreshes the row instead). */
  segmentMs: number;
  /** Bytes queued for the spool file beyond which the disk is not keeping up: the recording stops. */
  maxSpoolBacklogBytes: number;
  /** Closed segments waiting for upload beyond which the store is not keeping up: the recording stops. */
  maxPendingSegments: number;
}

const STAGING_BYTES = 512 * 1024;
/** Staging buffers kept for reuse, shared by the process's recorders (at most 16 MiB idle). */
const IDLE_STAGING_BUFFERS = 32;
/** Staging buffers come in slabs of this many, each slab one WebAssembly.Memory (page-aligned, as O_DIRECT needs). */
const SLAB_BUFFERS = 16;
const WASM_PAGE_BYTES = 64 * 1024;
const idleStaging: Buffer[] = [];

/**
 * A staging buffer, reused when one is idle. Reuse matters: fresh buffers are off-heap memory that V8 counts
 * against its external limit, and at 100+ MiB/s allocating one per flush while the disk lagged made major
 * collections of the api's whole heap the largest cost of recording. They are page-aligned so that the spool can
 * be written with O_DIRECT.
 */
function takeStaging(): Buffer {
  const idle = idleStaging.pop();
  if (idle) return idle;
  const pages = (STAGING_BYTES * SLAB_BUFFERS) / WASM_PAGE_BYTES;
  let slab: ArrayBuffer;
  try {
    slab = new WebAssembly.Memory({ initial: pages, maximum: pages }).buffer;
  } catch {
    // V8 bounds the address space of all its WebAssembly memories together: past it, an unaligned buffer, which
    // an O_DIRECT spool refuses (that recording stops; the stream goes on).
    return Buffer.allocUnsafeSlow(STAGING_BYTES);
  }
  for (let i = 1; i < SLAB_BUFFERS; i++) idleStaging.push(Buffer.from(slab, i * STAGING_BYTES, STAGING_BYTES));
  return Buffer.from(slab, 0, STAGING_BYTES);
}

function returnStaging(buffer: Buffer): void {
  if (idleStaging.length < IDLE_STAGING_BUFFERS) idleStaging.push(buffer);
}

/** Spool roots where O_DIRECT was tried: whether it works there. */
const directSupport = new Map<string, boolean>();

/**
 * O_DIRECT spool writes skip the page cache: the bytes go from the staging buffer to the disk, with no page-cache
 * page to allocate per 4 KiB written (in a VM, first-touched page-cache pages cost ~2 ms of kernel CPU per MiB,
 * more than forwarding the stream). Filesystems without it (tmpfs) get ordinary writes.
 */
function spoolOpenFlags(spoolDir: string): number {
  const { O_WRONLY, O_CREAT, O_EXCL, O_DIRECT } = fsConstants;
  const root = dirname(spoolDir);
  let direct = directSupport.get(root);
  if (direct === undefined) {
    const probe = join(spoolDir, '.direct-probe');
    try {
      closeSync(openSync(probe, O_WRONLY | O_CREAT | (O_DIRECT ?? 0), 0o600));
      direct = O_DIRECT !== undefined;
    } catch {
      direct = false;
    }
    rmSync(probe, { force: true });
    directSupport.set(root, direct);
  }
  return O_WRONLY | O_CREAT | O_EXCL | (direct ? (O_DIRECT as number) : 0);
}

export const DEFAULT_RECORDER_LIMITS: Omit<RecorderLimits, 'segmentBytes' | 'segmentMs'> = {
  maxSpoolBacklogBytes: 64 * 1024 * 1024,
  maxPendingSegments: 8,
};

/** The row changes a recorder makes (CaptureRows). Each answers false once the row is no longer `recording`. */
export interface RecorderRows {
  segmentStored(id: string, segmentCount: number, captureBytes: number): Promise<boolean>;
  touch(id: string): Promise<boolean>;
  finish(id: string, outcome: CaptureOutcome): Promise<boolean>;
}

export interface RecorderLog {
  warn(message: string): void;
}

export interface SessionRecorderOptions {
  id: string;
  capturePrefix: string;
  /** This recording's own spool directory (exists). */
  spoolDir: string;
  startedAt: Date;
  /** Stores a closed segment file (in the upload thread when there is one). */
  upload: UploadSegment;
  rows: RecorderRows;
  /** Resolves once the row is inserted; until then nothing is uploaded. A rejection ends the recording. */
  rowCreated: Promise<void>;
  limits: RecorderLimits;
  log: RecorderLog;
}

interface OpenSegment {
  path: string;
  stream: WriteStream;
  bytes: number;
  records: number;
  /** Bytes handed to the stream (whole staging buffers). */
  written: number;
}

type RecorderState = 'recording' | 'ending' | 'stopped';

/**
 * Records one stream connection. The hot path (serverChunk, pixelFormat) only copies the chunk behind a record
 * header into a staging buffer that goes to the current spool file's WriteStream when full; segments are closed
 * by size or age and uploaded one at a time, in order, off that path (in the upload thread when built). Any failure of the disk, the store or the database stops the recording (the
 * row keeps what was stored, with the reason) and never reaches the stream.
 */
export class SessionRecorder implements RfbSessionRecorder {
  readonly id: string;
  private readonly t0 = performance.now();
  private state: RecorderState = 'recording';
  private segment: OpenSegment | null = null;
  /** Records not yet handed to the current segment's stream (at most STAGING_BYTES; lost only if the process dies). */
  private staging: Buffer = takeStaging();
  private staged = 0;
  private readonly header = Buffer.alloc(RECORD_HEADER_BYTES);
  private nextSegment = 0;
  private serverRecords = 0;
  private pendingUploads = 0;
  private uploads: Promise<void> = Promise.resolve();
  private stored = 0;
  private storedBytes = 0;
  /** Whether the row exists: null until its insert settled. */
  private rowExists: boolean | null = null;
  private lastPointer = { x: -1, y: -1 };
  /** Reused: write copies the payload behind the record header. */
  private readonly pointerPayload = Buffer.alloc(4);
  /** Resolves once the insert settled: whether the row exists. */
  private readonly rowCreated: Promise<boolean>;
  private error: string | null = null;
  /** False when the row was finalized by someone else: then this recorder must not touch it again. */
  private ownsRow = true;
  private readonly timer: NodeJS.Timeout;
  private finalizing: Promise<void> | null = null;

  constructor(private readonly options: SessionRecorderOptions) {
    this.id = options.id;
    this.rowCreated = options.rowCreated.then(
      () => (this.rowExists = true),
      (err: Error) => {
        this.rowExists = false;
        this.stop(`its row could not be created: ${err.message}`);
        return false;
      },
    );
    this.timer = setInterval(() => this.tick(), options.limits.segmentMs);
    this.timer.unref();
  }

  get recording(): boolean {
    return this.state === 'recording';
  }

  private resolveClosed!: () => void;
  /** Resolves once the recording is finalized (after end(), or after it stopped early): its spool is gone. */
  readonly closed = new Promise<void>((resolve) => (this.resolveClosed = resolve));

  serverChunk(chunk: Buffer): void {
    if (this.state !== 'recording') return;
    this.serverRecords++;
    this.write(CaptureRecordKind.Server, chunk);
  }

  pixelFormat(raw: Buffer): void {
    if (this.state !== 'recording') return;
    this.write(CaptureRecordKind.PixelFormat, raw);
  }

  /** A pointer position; a repeat of the last one (a button press or release in place) is not written again. */
  pointer(x: number, y: number): void {
    if (this.state !== 'recording' || (x === this.lastPointer.x && y === this.lastPointer.y)) return;
    this.lastPointer = { x, y };
    this.pointerPayload.writeUInt16BE(x, 0);
    this.pointerPayload.writeUInt16BE(y, 2);
    this.write(CaptureRecordKind.Pointer, this.pointerPayload);
  }

  /** The session closed: End record, last segment uploaded, row `captured`, conversion enqueued. Idempotent. */
  end(): Promise<void> {
    if (this.state === 'recording') {
      this.state = 'ending';
      clearInterval(this.timer);
      if (this.serverRecords === 0) {
        // The session ended before its first frame: nothing worth converting.
        this.discardSegment();
        this.error = 'the session ended before the desktop sent anything';
      } else {
        this.write(CaptureRecordKind.End, Buffer.alloc(0), true);
        this.closeSegment();
      }
      this.finalizing = this.finalize();
    }
    return this.finalizing ?? Promise.resolve();
  }

  // ---------------------------------------------------------------- spool

  private write(kind: CaptureRecordKind, payload: Buffer, force = false): void {
    const segment = this.segment ?? this.openSegment();
    const header = writeRecordHeader(this.header, kind, performance.now() - this.t0, payload.length);
    // Records gather in the staging buffer (the copy the caller's reused buffer needs anyway), across buffers:
    // every spool write is one whole, aligned buffer, as O_DIRECT needs; the segment's tail is written at its close.
    this.append(segment, header);
    this.append(segment, payload);
    segment.bytes += RECORD_HEADER_BYTES + payload.length;
    segment.records++;
    if (force) return;
    if (segment.stream.writableLength > this.options.limits.maxSpoolBacklogBytes) {
      this.stop(`the spool disk did not keep up (${segment.stream.writableLength} bytes queued)`);
    } else if (segment.bytes >= this.options.limits.segmentBytes) {
      this.closeSegment();
    }
  }

  private append(segment: OpenSegment, bytes: Buffer): void {
    for (let from = 0; from < bytes.length; ) {
      const count = Math.min(bytes.length - from, STAGING_BYTES - this.staged);
      bytes.copy(this.staging, this.staged, from, from + count);
      this.staged += count;
      from += count;
      if (this.staged === STAGING_BYTES) this.flushFull(segment);
    }
  }

  /** Hands a full staging buffer to the spool file; it goes back to the idle ones once written. */
  private flushFull(segment: OpenSegment): void {
    const full = this.staging;
    segment.stream.write(full, () => returnStaging(full));
    segment.written += STAGING_BYTES;
    this.staging = takeStaging();
    this.staged = 0;
  }

  private openSegment(): OpenSegment {
    const path = join(this.options.spoolDir, segmentFileName(this.nextSegment++));
    // Numeric flags (O_DIRECT has no letter): fs.open takes them, the typings name only the string form.
    const stream = createWriteStream(path, { flags: spoolOpenFlags(this.options.spoolDir) as unknown as string });
    const segment: OpenSegment = { path, stream, bytes: CAPTURE_MAGIC.length, records: 0, written: 0 };
    stream.on('error', (err) => this.stop(`spool file ${path}: ${err.message}`));
    this.segment = segment;
    this.append(segment, CAPTURE_MAGIC);
    return segment;
  }

  /** Closes the current segment and queues its upload behind the earlier ones. */
  private closeSegment(): void {
    const segment = this.segment;
    if (!segment) return;
    this.segment = null;
    const tail = this.staging;
    const tailBytes = this.staged;
    this.staging = takeStaging();
    this.staged = 0;
    const closed = finished(segment.stream).then(() => writeTail(segment.path, tail, tailBytes, segment.written)).finally(() => returnStaging(tail));
    closed.catch(() => undefined); // reported by the stream's error listener; awaited by the upload
    segment.stream.end();
    if (++this.pendingUploads > this.options.limits.maxPendingSegments) {
      this.stop(`the store did not keep up (${this.pendingUploads} segments waiting)`);
    }
    this.uploads = this.uploads.then(() => this.upload(segment.path, closed));
  }

  private discardSegment(): void {
    const segment = this.segment;
    if (!segment) return;
    this.segment = null;
    this.staged = 0;
    segment.stream.destroy();
    void finished(segment.stream).catch(() => undefined).then(() => unlink(segment.path).catch(() => undefined));
  }

  // ---------------------------------------------------------------- store and row

  private async upload(path: string, closed: Promise<void>): Promise<void> {
    try {
      // A stopped recording uploads nothing more: the row keeps what was stored before the stop.
      if (this.error !== null) return;
      await closed;
      if (!(await this.rowCreated) || this.error !== null) return;
      const put = await this.options.upload(segmentKey(this.options.capturePrefix, this.stored), path);
      this.stored++;
      this.storedBytes += put.size;
      if (!(await this.options.rows.segmentStored(this.id, this.stored, this.storedBytes))) this.lostRow();
    } catch (err) {
      this.stop(`storing segment ${this.stored}: ${(err as Error).message}`);
    } finally {
      this.pendingUploads--;
      await unlink(path).catch(() => undefined);
    }
  }

  private tick(): void {
    if (this.state !== 'recording') return;
    if (this.segment && this.segment.records > 0) {
      this.closeSegment();
    } else if (this.rowExists) {
      this.options.rows.touch(this.id).then(
        (alive) => alive || this.lostRow(),
        (err: Error) => this.options.log.warn(`recording ${this.id}: refreshing its row failed: ${err.message}`),
      );
    }
  }

  /** Someone else finalized the row (finalizeAbandoned took this recording for dead): stop without touching it. */
  private lostRow(): void {
    this.ownsRow = false;
    this.stop('its row was finalized elsewhere');
  }

  /** Stops recording early (the stream goes on): what was stored stays, with the reason noted. */
  private stop(reason: string): void {
    if (this.error === null) this.error = `the recording stopped early: ${reason}`;
    if (this.state !== 'recording') return;
    this.state = 'stopped';
    clearInterval(this.timer);
    this.options.log.warn(`recording ${this.id}: ${this.error}`);
    this.discardSegment();
    this.finalizing = this.finalize();
  }

  private async finalize(): Promise<void> {
    const endedAt = new Date(this.options.startedAt.getTime() + (performance.now() - this.t0));
    try {
      await this.uploads;
      if (this.ownsRow && (await this.rowCreated)) {
        await this.options.rows.finish(this.id, { endedAt, segmentCount: this.stored, captureBytes: this.storedBytes, error: this.error });
      }
    } catch (err) {
      // The row stays `recording`; finalizeAbandoned ends it with the segments it counts.
      this.options.log.warn(`recording ${this.id}: finalizing its row failed: ${(err as Error).message}`);
    } finally {
      // Nothing is written any more: the (unwritten) staging buffer serves the next recording.
      returnStaging(this.staging);
      await rm(this.options.spoolDir, { recursive: true, force: true }).catch(() => undefined);
      this.resolveClosed();
    }
  }
}

/** The last, partial staging buffer of a segment, written after the stream's whole buffers (not O_DIRECT). */
async function writeTail(path: string, tail: Buffer, bytes: number, at: number): Promise<void> {
  if (bytes === 0) return;
  const handle = await open(path, 'r+');
  try {
    await handle.write(tail, 0, bytes, at);
  } finally {
    await handle.close();
  }
}

export function segmentFileName(index: number): string {
  return segmentKey('', index).slice(1);
}
