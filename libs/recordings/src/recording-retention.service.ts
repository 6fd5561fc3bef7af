import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { LessThan, Not, Repository } from 'typeorm';
import { AppConfig } from '@ws/common';
import { jobId, JobProducer } from '@ws/queue';
import { CaptureRows } from './capture/capture-rows';
import { deleteUnder, RecordingStores } from './recording-stores';
import { SessionRecording } from './session-recording.entity';

/** Rows deleted per statement batch, and batches per run: a large backlog is worked off over several runs. */
const EXPIRE_BATCH = 100;
const MAX_BATCHES_PER_RUN = 20;
/** A `captured` row untouched this long has probably lost its convert job (Redis lost it, or it was never added). */
export const LOST_CONVERSION_AFTER_MS = 10 * 60_000;

export interface RetentionReport {
  /** Captures whose api died, ended with what was stored (capture side). */
  finalized: number;
  expired: number;
  reenqueued: number;
}

/**
 * maintenance.expire-recordings: deletes recordings that started more than RECORDING_RETENTION_DAYS ago (0 keeps
 * them), objects first and the row last, so a run killed midway leaves a row whose objects the next run deletes
 * again (deleting what is gone is not an error); ends captures whose api died (CaptureRows.finalizeAbandoned);
 * and asks again for conversions whose job was lost.
 */
@Injectable()
export class RecordingRetention {
  private readonly logger = new Logger(RecordingRetention.name);

  constructor(
    @InjectRepository(SessionRecording) private readonly recordings: Repository<SessionRecording>,
    private readonly stores: RecordingStores,
    private readonly captures: CaptureRows,
    private readonly producer: JobProducer,
    private readonly config: AppConfig,
  ) {}

  async run(now = new Date()): Promise<RetentionReport> {
    const finalized = await this.captures.finalizeAbandoned(now);
    const expired = await this.expire(now);
    const reenqueued = await this.reenqueueLost(now);
    return { finalized, expired, reenqueued };
  }

  async expire(now: Date): Promise<number> {
    const days = this.config.RECORDING_RETENTION_DAYS;
    if (days === 0) return 0;
    const cutoff = new Date(now.getTime() - days * 86_400_000);
    let expired = 0;
    for (let batch = 0; batch < MAX_BATCHES_PER_RUN; batch++) {
      // A capture still being written is left to the capture side (it finalizes abandoned ones); it expires after.
      const due = await this.recordings.find({ where: { startedAt: LessThan(cutoff), status: Not('recording') }, order: { startedAt: 'ASC' }, take: EXPIRE_BATCH });
      for (const recording of due) {
        await this.deleteRecording(recording);
        expired++;
      }
      if (due.length < EXPIRE_BATCH) break;
    }
    if (expired) this.logger.log(`deleted ${expired} recordings older than ${days} days`);
    return expired;
  }

  /** The video, any leftover capture segments, then the row. */
  async deleteRecording(recording: SessionRecording): Promise<void> {
    const store = this.stores.of(recording.storageUrl);
    if (recording.videoKey) await store.delete(recording.videoKey);
    await deleteUnder(store, recording.capturePrefix);
    await this.recordings.delete({ id: recording.id });
  }

  private async reenqueueLost(now: Date): Promise<number> {
    const stale = await this.recordings.find({
      select: { id: true },
      where: { status: 'captured', updatedAt: LessThan(new Date(now.getTime() - LOST_CONVERSION_AFTER_MS)) },
      order: { updatedAt: 'ASC' },
      take: 1000,
    });
    // ensure() leaves a waiting or running job alone; it only adds a missing one or retries a failed one.
    for (const { id } of stale) await this.producer.ensure('recording.convert', { recordingId: id }, jobId.convertRecording(id));
    return stale.length;
  }
}
