import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AppConfig } from '@ws/common';
import { JobProducer } from '@ws/queue';
import { OnWorkspaceEvent, stagingOriginOf, WorkspaceEventMessage } from '@ws/workspaces';

/**
 * Refills a pool when one of its staged workspaces leaves it: handed to a user (`assigned`, after
 * STAGING_REFILL_DELAY_MS, so the new desktop does not boot beside the claimant's first picture), or gone before
 * that (`failed`, `destroyed`, e.g. on expiry: at once). Asks for the config's reconcile job; an event delivered
 * twice asks twice, which the reconcile absorbs (it counts the pool under a lock).
 */
@Injectable()
export class StagingReplenisher {
  constructor(
    private readonly jobs: JobProducer,
    private readonly config: AppConfig,
  ) {}

  @OnWorkspaceEvent({ name: 'staging-replenish', types: ['assigned', 'failed', 'destroyed'] })
  async replenish(event: WorkspaceEventMessage, tx: EntityManager): Promise<void> {
    const origin = await stagingOriginOf(tx, event.workspaceId);
    if (!origin?.stagingConfigId) return;
    // A staged workspace's own end after it was handed out is its user's business, not the pool's.
    if (event.type !== 'assigned' && origin.assignedAt) return;
    const delay = event.type === 'assigned' ? this.config.STAGING_REFILL_DELAY_MS : 0;
    await this.jobs.enqueue('staging.reconcile', { stagingConfigId: origin.stagingConfigId }, delay > 0 ? { delay } : {});
  }
}
