import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { ObjectStore } from '@ws/storage';
import { CAPTURE_MAGIC, CaptureRecordKind, isCaptureRecordKind, RECORD_HEADER_BYTES, recordHeader, segmentKey } from '../capture-format';
import type { SessionRecording } from '../session-recording.entity';
import type { CaptureOutcome } from './capture-rows';
import { putSpoolFile } from './segment-uploader';

/**
 * Who writes a spool directory: the recovery at the next start takes only directories of its own deployment
 * whose writer is gone.
 */
export interface SpoolOwner {
  deployment: string;
  host: string;
  pid: number;
  /** One per capture service instance (several can live in one process, e.g. in tests). */
  instance: string;
}

const OWNER_FILE = 'owner.json';
const SEGMENT_FILE = /^segment-(\d{6})\.wsrc$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Capture service instances alive in this process. */
const liveInstances = new Set<string>();

export function newSpoolOwner(deployment: string): SpoolOwner {
  const owner = { deployment, host: hostname(), pid: process.pid, instance: randomUUID() };
  liveInstances.add(owner.instance);
  return owner;
}

export function retireSpoolOwner(owner: SpoolOwner): void {
  liveInstances.delete(owner.instance);
}

/** Creates a recording's spool directory with its owner file (synchronous: a few small syscalls at connect). */
export function createSpoolDir(root: string, recordingId: string, owner: SpoolOwner): string {
  const dir = join(root, recordingId);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, OWNER_FILE), JSON.stringify(owner));
  return dir;
}

/** True or false when it can be told from this host; null for another host's writer. */
export function ownerAlive(owner: SpoolOwner): boolean | null {
  if (owner.host !== hostname()) return null;
  if (owner.pid === process.pid) return liveInstances.has(owner.instance);
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface SegmentScan {
  /** Bytes up to the end of the last whole record (0: not even the magic). */
  validBytes: number;
  records: number;
  lastAt: number | null;
  lastKind: CaptureRecordKind | null;
}

/** Walks a segment file's record headers (never reading payloads) up to the first incomplete or unknown record. */
export async function scanSegment(path: string): Promise<SegmentScan> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    const scan: SegmentScan = { validBytes: 0, records: 0, lastAt: null, lastKind: null };
    const magic = Buffer.alloc(CAPTURE_MAGIC.length);
    if (size < magic.length || (await file.read(magic, 0, magic.length, 0)).bytesRead < magic.length || !magic.equals(CAPTURE_MAGIC)) return scan;
    const header = Buffer.alloc(RECORD_HEADER_BYTES);
    let position = CAPTURE_MAGIC.length;
    scan.validBytes = position;
    while (position + RECORD_HEADER_BYTES <= size) {
      await file.read(header, 0, RECORD_HEADER_BYTES, position);
      const kind = header.readUInt8(0);
      const end = position + RECORD_HEADER_BYTES + header.readUInt32BE(5);
      if (end > size || !isCaptureRecordKind(kind)) break;
      scan.records++;
      scan.lastAt = header.readUInt32BE(1);
      scan.lastKind = kind;
      scan.validBytes = position = end;
    }
    return scan;
  } finally {
    await file.close();
  }
}

export interface RecoveryRows {
  find(id: string): Promise<SessionRecording | null>;
  segmentStored(id: string, segmentCount: number, captureBytes: number): Promise<boolean>;
  finish(id: string, outcome: CaptureOutcome): Promise<boolean>;
}

export interface SpoolRecoveryOptions {
  root: string;
  deployment: string;
  rows: RecoveryRows;
  /** The store a row's storageUrl names. */
  storeFor(url: string): ObjectStore;
  /** A row not refreshed since this is abandoned (for writers on other hosts, whose liveness cannot be asked). */
  abandonedBefore: Date;
  log: { log(message: string): void; warn(message: string): void };
}

/**
 * Finishes the recordings a previous process left in the spool: the segments it had not uploaded are
 * trimmed to whole records, closed with an End record, uploaded in order, and the row finalized (`captured`,
 * endedAt from the last record) with its conversion asked for. Answers the ids it finished.
 */
export async function recoverSpool(options: SpoolRecoveryOptions): Promise<string[]> {
  await mkdir(options.root, { recursive: true });
  const recovered: string[] = [];
  for (const entry of await readdir(options.root, { withFileTypes: true })) {
    if (!entry.isDirectory() || !UUID.test(entry.name)) continue;
    const dir = join(options.root, entry.name);
    try {
      if (await recoverOne(entry.name, dir, options)) recovered.push(entry.name);
    } catch (err) {
      options.log.warn(`recording ${entry.name}: recovering its spool failed (${(err as Error).message}); the next start tries again`);
    }
  }
  return recovered;
}

async function recoverOne(id: string, dir: string, options: SpoolRecoveryOptions): Promise<boolean> {
  const owner = await readOwner(dir);
  if (!owner || owner.deployment !== options.deployment) return false; // another deployment's spool on a shared disk
  const alive = ownerAlive(owner);
  if (alive) return false;
  const row = await options.rows.find(id);
  if (!row || row.status !== 'recording') {
    // Its workspace is gone, or the row was finalized (finalizeAbandoned) with what was stored: nothing to add.
    await rm(dir, { recursive: true, force: true });
    return false;
  }
  if (alive === null && row.updatedAt > options.abandonedBefore) return false;

  const files = (await readdir(dir)).map((name) => ({ name, match: SEGMENT_FILE.exec(name) })).filter((f) => f.match).map((f) => ({ path: join(dir, f.name), index: Number((f.match as RegExpExecArray)[1]) }));
  files.sort((a, b) => a.index - b.index);
  const pending: { path: string; scan: SegmentScan }[] = [];
  for (const file of files) {
    // Segments below segmentCount were stored before the process died (it died before deleting the file).
    const scan = file.index < row.segmentCount ? null : await scanSegment(file.path);
    if (scan && scan.records > 0) pending.push({ path: file.path, scan });
    else await unlink(file.path);
  }
  let lastAt: number | null = null;
  const last = pending[pending.length - 1];
  if (last) {
    const handle = await open(last.path, 'r+');
    try {
      await handle.truncate(last.scan.validBytes);
      if (last.scan.lastKind !== CaptureRecordKind.End) await handle.write(recordHeader(CaptureRecordKind.End, last.scan.lastAt ?? 0, 0), 0, RECORD_HEADER_BYTES, last.scan.validBytes);
    } finally {
      await handle.close();
    }
    lastAt = last.scan.lastAt;
  }
  const store = options.storeFor(row.storageUrl);
  let segmentCount = row.segmentCount;
  let captureBytes = row.captureBytes;
  for (const segment of pending) {
    if (segment !== last) await truncateTo(segment.path, segment.scan.validBytes);
    const put = await putSpoolFile(store, segmentKey(row.capturePrefix, segmentCount), segment.path);
    segmentCount++;
    captureBytes += put.size;
    if (!(await options.rows.segmentStored(id, segmentCount, captureBytes))) {
      await rm(dir, { recursive: true, force: true });
      return false;
    }
  }
  const endedAt = lastAt !== null ? new Date(row.startedAt.getTime() + lastAt) : row.updatedAt;
  const finished = await options.rows.finish(id, { endedAt, segmentCount, captureBytes, error: null });
  await rm(dir, { recursive: true, force: true });
  if (finished) options.log.log(`recording ${id}: recovered ${pending.length} spooled segment(s) after a restart`);
  return finished;
}

async function truncateTo(path: string, bytes: number): Promise<void> {
  const handle = await open(path, 'r+');
  try {
    await handle.truncate(bytes);
  } finally {
    await handle.close();
  }
}

async function readOwner(dir: string): Promise<SpoolOwner | null> {
  try {
    const owner = JSON.parse(await readFile(join(dir, OWNER_FILE), 'utf8')) as SpoolOwner;
    return typeof owner.deployment === 'string' && typeof owner.pid === 'number' ? owner : null;
  } catch {
    return null;
  }
}

/** For tests and tools: writes a spool directory as a writer that died would have left it. */
export async function writeSpoolOwner(dir: string, owner: SpoolOwner): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, OWNER_FILE), JSON.stringify(owner));
}
