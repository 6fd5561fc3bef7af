import { Injectable } from '@nestjs/common';
import { JobHandler, JobPayloads } from '@ws/queue';
import { StagingReconciler } from '@ws/staging';

@Injectable()
export class StagingProcessor {
  constructor(private readonly reconciler: StagingReconciler) {}

  @JobHandler('staging.reconcile')
  reconcile(payload: JobPayloads['staging.reconcile']) {
    return this.reconciler.reconcile(payload.stagingConfigId);
  }
}
