import { execFile } from 'node:child_process';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { DataSource } from 'typeorm';
import { newId, randomSecret } from '@ws/common';
import { CAPTURE_MAGIC, CaptureRecordKind, recordHeader, RecordingStatus, segmentKey, SessionRecording } from '@ws/recordings';
import { ObjectStore } from '@ws/storage';

const run = promisify(execFile);

/**
 * A workspace row (and its image) in raw SQL, with only the columns every version of the table has: recordings
 * only need a workspace to belong to, and the entity's other columns are other areas' business.
 */
export async function insertWorkspace(db: DataSource, userId: string, status: 'running' | 'deleted'): Promise<{ id: string }> {
  const imageId = newId();
  await db.query('INSERT INTO images (id, name, friendly_name) VALUES ($1, $2, $3)', [imageId, 'example/desktop:1', `Desktop ${randomSecret(4)}`]);
  const id = newId();
  await db.query(
    `INSERT INTO workspaces (id, user_id, image_id, status, cores, memory, token, view_only_token, share_id, start_date, keepalive_date, expiration_date)
     VALUES ($1, $2, $3, $4, 1, 1073741824, $5, $6, $7, now(), now(), now() + interval '1 hour')`,
    [id, userId, imageId, status, randomSecret(), randomSecret(), randomSecret(16)],
  );
  return { id };
}

/** Seconds of media ffprobe reads from a file or an http(s) url (the container's duration, else the stream's). */
export async function probeDuration(source: string): Promise<number> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_entries', 'format=duration:stream=duration,codec_name,width,height', '-of', 'json', source], { timeout: 60_000 });
  const probed = JSON.parse(stdout) as { format?: { duration?: string }; streams?: Array<{ duration?: string }> };
  const duration = Number(probed.format?.duration ?? probed.streams?.[0]?.duration);
  if (!Number.isFinite(duration)) throw new Error(`ffprobe found no duration in ${source}: ${stdout}`);
  return duration;
}

/** A small VP8 WebM of `seconds` made by ffmpeg's test source: a real video for rows seeded as ready. */
export async function makeWebm(path: string, seconds: number): Promise<void> {
  await run('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc=duration=${seconds}:size=160x120:rate=5`, '-c:v', 'libvpx', '-b:v', '200k', path], { timeout: 120_000 });
}

/**
 * A raw capture as the gateway writes it (capture-format.ts): ServerInit of a `width`×`height` 32-bit true-colour
 * desktop, then one full-screen raw update per frame (a box moving across a changing background) every
 * 1000/fps ms for `seconds` (at most `maxFrames` updates, spread evenly), then End; cut into `segments` segments of
 * whole records.
 */
export function buildCapture(options: { width: number; height: number; seconds: number; fps: number; segments: number; maxFrames?: number }): Buffer[] {
  const { width, height, seconds } = options;
  // Fewer updates than frames for long captures: the video repeats the last frame until the next update.
  const fps = Math.min(options.fps, (options.maxFrames ?? Infinity) / seconds);
  const records: Buffer[] = [];
  const record = (kind: CaptureRecordKind, at: number, payload: Buffer) => records.push(Buffer.concat([recordHeader(kind, at, payload.length), payload]));

  const name = Buffer.from('seeded desktop');
  const serverInit = Buffer.alloc(24 + name.length);
  serverInit.writeUInt16BE(width, 0);
  serverInit.writeUInt16BE(height, 2);
  // bits-per-pixel 32, depth 24, little-endian, true colour, max 255/255/255, shifts red 16, green 8, blue 0.
  Buffer.from([32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0]).copy(serverInit, 4);
  serverInit.writeUInt32BE(name.length, 20);
  name.copy(serverInit, 24);
  record(CaptureRecordKind.Server, 0, serverInit);

  const frames = Math.max(1, Math.round(seconds * fps));
  for (let frame = 0; frame < frames; frame++) {
    const update = Buffer.alloc(4 + 12 + width * height * 4);
    update.writeUInt8(0, 0); // FramebufferUpdate
    update.writeUInt16BE(1, 2);
    update.writeUInt16BE(0, 4);
    update.writeUInt16BE(0, 6);
    update.writeUInt16BE(width, 8);
    update.writeUInt16BE(height, 10);
    update.writeInt32BE(0, 12); // Raw
    const boxX = Math.floor(((width - 20) * frame) / frames);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const inBox = x >= boxX && x < boxX + 20 && y >= height / 2 - 10 && y < height / 2 + 10;
        const offset = 16 + (y * width + x) * 4;
        update.writeUInt8(inBox ? 255 : 40, offset); // blue
        update.writeUInt8(inBox ? 255 : (frame * 7) % 256, offset + 1); // green
        update.writeUInt8(inBox ? 255 : 90, offset + 2); // red
      }
    }
    record(CaptureRecordKind.Server, Math.round((frame * 1000) / fps), update);
  }
  record(CaptureRecordKind.End, Math.round(seconds * 1000), Buffer.alloc(0));

  const perSegment = Math.ceil(records.length / options.segments);
  const segments: Buffer[] = [];
  for (let i = 0; i < records.length; i += perSegment) segments.push(Buffer.concat([CAPTURE_MAGIC, ...records.slice(i, i + perSegment)]));
  return segments;
}

/** Stores `segments` under the recording's capture prefix and inserts its row as the capture side leaves it. */
export async function seedCapture(
  db: DataSource,
  store: ObjectStore,
  row: { workspaceId: string; userId: string | null; storageUrl: string; startedAt: Date; seconds: number; status?: RecordingStatus },
  segments: Buffer[],
): Promise<SessionRecording> {
  const id = newId();
  const capturePrefix = `recordings/${row.workspaceId}/${id}/capture`;
  for (const [index, segment] of segments.entries()) await store.put(segmentKey(capturePrefix, index), Readable.from([segment]));
  return db.getRepository(SessionRecording).save({
    id, workspaceId: row.workspaceId, userId: row.userId, clientId: 'seeded', status: row.status ?? 'captured', storageUrl: row.storageUrl, capturePrefix,
    segmentCount: segments.length, captureBytes: segments.reduce((sum, s) => sum + s.length, 0), startedAt: row.startedAt,
    endedAt: new Date(row.startedAt.getTime() + row.seconds * 1000),
  });
}
