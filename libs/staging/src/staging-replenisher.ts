import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { JobProducer } from '@ws/queue';
import { OnWorkspaceEvent, WorkspaceEventMessage } from '@ws/workspaces';

/**
 * Refills a pool when one of its staged workspaces leaves it: handed to a user (`assigned`), or gone before
 * that (`failed`, `destroyed`, e.g. on expiry). Asks for the config's reconcile job; an event delivered twice
 * asks twice, which the reconcile absorbs (it counts the pool under a lock).
 */
@Injectable()
export class StagingReplenisher {
  constructor(private readonly jobs: JobProducer) {}

  @OnWorkspaceEvent({ name: 'staging-replenish', types: ['assigned', 'failed', 'destroyed'] })
  async replenish(event: WorkspaceEventMessage, tx: EntityManager): Promise<void> {
    const [row] = (await tx.query('SELECT staging_config_id, assigned_at FROM workspaces WHERE id = $1', [event.workspaceId])) as Array<{ staging_config_id: string | null; assigned_at: Date | null }>;
    if (!row?.staging_config_id) return;
    // A staged workspace's own end after it was handed out is its user's business, not the pool's.
    if (event.type !== 'assigned' && row.assigned_at) return;
    await this.jobs.enqueue('staging.reconcile', { stagingConfigId: row.staging_config_id });
  }
}
