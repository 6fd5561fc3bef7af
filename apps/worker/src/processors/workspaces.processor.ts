import { Injectable } from '@nestjs/common';
import { Job } from 'bullmq';
import { JobHandler, JobPayloads, MAX_JOB_STALLS } from '@ws/queue';
import { WorkspaceRuntime } from '@ws/workspaces';

@Injectable()
export class WorkspacesProcessor {
  constructor(private readonly runtime: WorkspaceRuntime) {}

  @JobHandler('workspace.provision')
  provision(payload: JobPayloads['workspace.provision'], job: Job, signal: AbortSignal) {
    if (job.stalledCounter > MAX_JOB_STALLS) {
      return this.runtime.abandonProvision(payload.workspaceId, `its worker stopped ${job.stalledCounter} times while starting it`);
    }
    return this.runtime.provision(payload.workspaceId, { final: job.attemptsMade + 1 >= (job.opts.attempts ?? 1), signal });
  }

  @JobHandler('workspace.destroy')
  destroy(payload: JobPayloads['workspace.destroy']) {
    return this.runtime.destroy(payload.workspaceId);
  }
}
