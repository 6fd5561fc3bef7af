import { Injectable } from '@nestjs/common';
import { DestroyReason, jobId, JobProducer } from '@ws/queue';
import { WorkspaceLifecycle } from './workspace-lifecycle.service';

/**
 * Marks a workspace `stopping` and hands its removal to the worker. The row change comes first: if the
 * enqueue is lost, the reconciler finds the `stopping` row and enqueues again (same job id, no duplicate).
 */
@Injectable()
export class WorkspaceTeardown {
  constructor(
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly jobs: JobProducer,
  ) {}

  async destroy(workspaceId: string, reason: DestroyReason): Promise<void> {
    await this.lifecycle.stop(workspaceId, reason);
    await this.jobs.enqueue('workspace.destroy', { workspaceId, reason }, { jobId: jobId.destroy(workspaceId) });
  }
}
