import { Injectable } from '@nestjs/common';
import { Job } from 'bullmq';
import { JobHandler, JobPayloads, MAX_JOB_STALLS } from '@ws/queue';
import { RecordingConversion, RecordingRetention } from '@ws/recordings';

@Injectable()
export class RecordingsProcessor {
  constructor(
    private readonly conversion: RecordingConversion,
    private readonly retention: RecordingRetention,
  ) {}

  @JobHandler('recording.convert')
  convert(payload: JobPayloads['recording.convert'], job: Job, signal: AbortSignal) {
    if (job.stalledCounter > MAX_JOB_STALLS) {
      return this.conversion.abandon(payload.recordingId, `its worker stopped ${job.stalledCounter} times while converting it`);
    }
    return this.conversion.convert(payload.recordingId, { final: job.attemptsMade + 1 >= (job.opts.attempts ?? 1), signal });
  }

  @JobHandler('maintenance.expire-recordings')
  expireRecordings() {
    return this.retention.run();
  }
}
