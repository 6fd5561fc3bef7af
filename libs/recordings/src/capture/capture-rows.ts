import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { AppConfig } from '@ws/common';
import { jobId, JobProducer } from '@ws/queue';
import { SessionRecording } from '../session-recording.entity';

/** A live recording refreshes its row at least every RECORDING_SEGMENT_SECONDS; three of those missed means its api is gone. */
export const ABANDONED_AFTER_SEGMENTS = 3;

export interface NewRecording {
  id: string;
  workspaceId: string;
  userId: string | null;
  clientId: string;
  storageUrl: string;
  capturePrefix: string;
  startedAt: Date;
}

export interface CaptureOutcome {
  endedAt: Date;
  segmentCount: number;
  captureBytes: number;
  /** Why the recording stopped before its session ended, if it did. */
  error?: string | null;
}

/** Key prefix of a recording's raw capture segments. */
export function capturePrefixOf(workspaceId: string, recordingId: string): string {
  return `recordings/${workspaceId}/${recordingId}/capture`;
}

/**
 * The capture side's changes to session_recordings rows. Every change after the insert is conditional on
 * status `recording`: whoever finalizes a row first (its recorder, the spool recovery, finalizeAbandoned) wins,
 * and the others see `false` and stop.
 */
@Injectable()
export class CaptureRows {
  private readonly logger = new Logger(CaptureRows.name);

  constructor(
    @InjectRepository(SessionRecording) private readonly rows: Repository<SessionRecording>,
    private readonly jobs: JobProducer,
    private readonly config: AppConfig,
  ) {}

  async create(recording: NewRecording): Promise<void> {
    await this.rows.insert({ ...recording, status: 'recording', segmentCount: 0, captureBytes: 0 });
  }

  find(id: string): Promise<SessionRecording | null> {
    return this.rows.findOneBy({ id });
  }

  /** A segment is stored: counts it (and refreshes updatedAt). False when the row is no longer recording. */
  async segmentStored(id: string, segmentCount: number, captureBytes: number): Promise<boolean> {
    return this.whileRecording(id, { segmentCount, captureBytes });
  }

  /** Nothing to store for a while, but the recording is alive (finalizeAbandoned goes by updatedAt). */
  async touch(id: string): Promise<boolean> {
    return this.whileRecording(id, {});
  }

  /**
   * Ends the capture: `captured` when a segment was stored, else `failed`; then asks for the conversion. False
   * when someone else had already finalized the row.
   */
  async finish(id: string, outcome: CaptureOutcome): Promise<boolean> {
    const captured = outcome.segmentCount > 0;
    const done = await this.whileRecording(id, {
      status: captured ? 'captured' : 'failed',
      endedAt: outcome.endedAt,
      segmentCount: outcome.segmentCount,
      captureBytes: outcome.captureBytes,
      error: captured ? outcome.error ?? null : outcome.error ?? 'no capture was stored',
    });
    if (done && captured) await this.enqueueConversion(id);
    return done;
  }

  /**
   * Rows stuck in `recording` whose api died for good (no refresh for ABANDONED_AFTER_SEGMENTS segment periods):
   * `captured` with the segments that were uploaded (and their conversion asked for), or `failed` when none was.
   * Answers how many rows it finalized. The maintenance job calls it.
   */
  async finalizeAbandoned(now: Date = new Date()): Promise<number> {
    const cutoff = new Date(now.getTime() - ABANDONED_AFTER_SEGMENTS * this.config.RECORDING_SEGMENT_SECONDS * 1000);
    const stale = await this.rows
      .createQueryBuilder('r')
      .where('r.status = :status', { status: 'recording' })
      .andWhere('r.updatedAt < :cutoff', { cutoff })
      .orderBy('r.updatedAt', 'ASC')
      .limit(500)
      .getMany();
    let finalized = 0;
    for (const row of stale) {
      // The last refresh is the closest thing to the end of what was stored.
      const done = await this.finish(row.id, { endedAt: row.updatedAt, segmentCount: row.segmentCount, captureBytes: row.captureBytes, error: row.segmentCount > 0 ? 'the recording api stopped; the capture ends with the last stored segment' : null });
      if (done) finalized++;
    }
    return finalized;
  }

  /** Enqueues recording.convert under its deterministic id; a lost enqueue is redone by maintenance.expire-recordings. */
  async enqueueConversion(id: string): Promise<void> {
    try {
      await this.jobs.ensure('recording.convert', { recordingId: id }, jobId.convertRecording(id));
    } catch (err) {
      this.logger.warn(`recording ${id}: could not enqueue its conversion (${(err as Error).message}); maintenance will`);
    }
  }

  private async whileRecording(id: string, change: Partial<SessionRecording>): Promise<boolean> {
    const result = await this.rows
      .createQueryBuilder()
      .update(SessionRecording)
      .set({ ...change, updatedAt: () => 'now()' } as never)
      .where('id = :id AND status = :status', { id, status: 'recording' })
      .execute();
    return (result.affected ?? 0) > 0;
  }
}
