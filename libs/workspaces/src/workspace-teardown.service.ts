import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { DestroyReason, jobId, JobProducer } from '@ws/queue';
import { Workspace, WorkspaceStatus } from './workspace.entity';

const DESTROYABLE: WorkspaceStatus[] = ['starting', 'running', 'failed', 'stopping'];

/**
 * Marks a workspace `stopping` and hands its removal to the worker. The row change comes first: if the
 * enqueue is lost, the reconciler finds the `stopping` row and enqueues again (same job id, no duplicate).
 */
@Injectable()
export class WorkspaceTeardown {
  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly jobs: JobProducer,
  ) {}

  async destroy(workspaceId: string, reason: DestroyReason): Promise<void> {
    await this.workspaces.update(
      { id: workspaceId, status: In(DESTROYABLE) },
      { status: 'stopping', destroyReason: reason, operationalMessage: 'Removing the workspace', operationalProgress: 0 },
    );
    await this.jobs.enqueue('workspace.destroy', { workspaceId, reason }, { jobId: jobId.destroy(workspaceId) });
  }
}
