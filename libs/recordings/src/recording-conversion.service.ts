import { createReadStream } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { AppConfig } from '@ws/common';
import { Metrics, secondsSince } from '@ws/metrics';
import { PermanentFailure } from '@ws/queue';
import { ObjectNotFoundError, ObjectStore, putVerified } from '@ws/storage';
import { CaptureFormatError, segmentKey } from './capture-format';
import { convertCapture } from './convert';
import { deleteUnder, RecordingStores, recordingVideoKey } from './recording-stores';
import { RecordingStatus, SessionRecording } from './session-recording.entity';

export interface ConversionOptions {
  /** The job's last attempt: a failure now marks the recording failed. */
  final: boolean;
  /** Aborted when the worker hands the job back at shutdown: stop, record nothing. */
  signal: AbortSignal;
}

/** What a run found or did (the job's return value, for the queue's history). */
export type ConversionOutcome = { recordingId: string; status: RecordingStatus | 'gone'; segmentsDeleted: number };

/**
 * recording.convert: a `captured` recording's raw segments → a verified video object → the row `ready` → the
 * segments deleted, in that order, so a run killed at any line leaves either the capture (a retry converts
 * again, overwriting the not yet published video) or a ready row (a retry only deletes leftover segments).
 */
@Injectable()
export class RecordingConversion {
  private readonly logger = new Logger(RecordingConversion.name);

  constructor(
    @InjectRepository(SessionRecording) private readonly recordings: Repository<SessionRecording>,
    private readonly stores: RecordingStores,
    private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {}

  async convert(recordingId: string, options: ConversionOptions): Promise<ConversionOutcome> {
    const recording = await this.recordings.findOneBy({ id: recordingId });
    if (!recording) return { recordingId, status: 'gone', segmentsDeleted: 0 };
    const store = this.stores.of(recording.storageUrl);
    if (recording.status === 'ready') return { recordingId, status: 'ready', segmentsDeleted: await deleteUnder(store, recording.capturePrefix) };
    // `recording`: still being captured (the capture side enqueues again when it is done); `failed`: an operator's.
    if (recording.status !== 'captured') return { recordingId, status: recording.status, segmentsDeleted: 0 };

    let status: RecordingStatus | 'gone';
    const started = performance.now();
    try {
      status = await this.publish(recording, store, options.signal);
    } catch (err) {
      if (options.signal.aborted) throw err;
      const permanent = err instanceof CaptureFormatError || err instanceof ObjectNotFoundError || err instanceof PermanentFailure;
      if (permanent || options.final) {
        this.metrics.recordingConversions.inc({ outcome: 'failed' });
        await this.fail(recordingId, (err as Error).message);
        throw permanent ? new PermanentFailure(`recording ${recordingId}: ${(err as Error).message}`) : err;
      }
      this.metrics.recordingConversions.inc({ outcome: 'retried' });
      throw err;
    }
    if (status === 'ready') {
      this.metrics.recordingConversions.inc({ outcome: 'converted' });
      this.metrics.recordingConversionDuration.observe(secondsSince(started));
    }
    if (status !== 'ready') return { recordingId, status, segmentsDeleted: 0 };
    return { recordingId, status, segmentsDeleted: await deleteUnder(store, recording.capturePrefix) };
  }

  /** A job that kept killing its worker: the recording is marked failed (its capture kept) instead of trying again. */
  async abandon(recordingId: string, why: string): Promise<ConversionOutcome> {
    this.metrics.recordingConversions.inc({ outcome: 'failed' });
    await this.fail(recordingId, `conversion abandoned: ${why}`);
    return { recordingId, status: 'failed', segmentsDeleted: 0 };
  }

  /** Converts in a scratch directory, stores the video verified, then switches the row; answers the row's status after. */
  private async publish(recording: SessionRecording, store: ObjectStore, signal: AbortSignal): Promise<RecordingStatus | 'gone'> {
    if (!recording.endedAt) throw new PermanentFailure('the capture has no end time');
    const scratchPrefix = `ws-recording-${recording.id}-`;
    // A worker killed mid-conversion leaves its scratch directory (and its half-written video) behind.
    for (const name of await readdir(tmpdir()).catch(() => [] as string[])) {
      if (name.startsWith(scratchPrefix)) await rm(join(tmpdir(), name), { recursive: true, force: true });
    }
    const workDir = await mkdtemp(join(tmpdir(), scratchPrefix));
    try {
      const video = await convertCapture({
        segments: segmentsOf(store, recording),
        durationMs: Math.max(0, recording.endedAt.getTime() - recording.startedAt.getTime()),
        fps: this.config.RECORDING_FPS,
        workDir,
        signal,
      });
      const videoKey = recordingVideoKey(recording.workspaceId, recording.id);
      // Nobody reads this key before the row below says ready, so a retry may overwrite it.
      const stored = await putVerified(store, videoKey, createReadStream(video.videoPath), {}, { contentType: video.contentType });
      const switched = await this.recordings
        .createQueryBuilder()
        .update()
        .set({
          status: 'ready', videoKey, videoBytes: stored.size, videoContentType: video.contentType, durationSeconds: Math.round(video.durationSeconds),
          thumbnail: `data:image/jpeg;base64,${video.thumbnailJpeg.toString('base64')}`, error: null,
        })
        .where('id = :id AND status = :status', { id: recording.id, status: 'captured' })
        .execute();
      if (switched.affected) return 'ready';
      const now = await this.recordings.findOneBy({ id: recording.id });
      // Deleted meanwhile (retention): the video just stored belongs to nobody.
      if (!now) await store.delete(videoKey);
      return now?.status ?? 'gone';
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  }

  private async fail(recordingId: string, error: string): Promise<void> {
    this.logger.warn(`recording ${recordingId}: conversion failed: ${error}`);
    await this.recordings
      .createQueryBuilder()
      .update()
      .set({ status: 'failed', error: error.slice(0, 4000) })
      .where('id = :id AND status = :status', { id: recordingId, status: 'captured' })
      .execute();
  }
}

/** The capture's segments in order, each opened only when the converter reaches it. */
async function* segmentsOf(store: ObjectStore, recording: SessionRecording): AsyncGenerator<Readable> {
  for (let index = 0; index < recording.segmentCount; index++) yield await store.get(segmentKey(recording.capturePrefix, index));
}
