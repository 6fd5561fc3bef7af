import { Injectable } from '@nestjs/common';
import { Job } from 'bullmq';
import { JobHandler, JobPayloads } from '@ws/queue';
import { WorkspaceRuntime } from '@ws/workspaces';

@Injectable()
export class WorkspacesProcessor {
  constructor(private readonly runtime: WorkspaceRuntime) {}

  @JobHandler('workspace.provision')
  provision(payload: JobPayloads['workspace.provision'], job: Job) {
    return this.runtime.provision(payload.workspaceId, { final: job.attemptsMade + 1 >= (job.opts.attempts ?? 1) });
  }

  @JobHandler('workspace.destroy')
  destroy(payload: JobPayloads['workspace.destroy']) {
    return this.runtime.destroy(payload.workspaceId);
  }
}
