import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { toWireId } from '@ws/common';
import { StagingConfig } from '@ws/staging';
import { OnWorkspaceEvent, stagedReadyAfter, stagingConfigOf, WORKSPACE_EVENT_TYPES, WorkspaceEventMessage } from '@ws/workspaces';
import { fanOut } from './webhook-fanout';
import type { WebhookEventType } from './webhook-events';

/**
 * The workspace lifecycle outbox, turned into webhook messages (worker). Relayed in commit order, at least once,
 * and written through the relay's transaction: each event becomes one message per endpoint once. A staged
 * workspace's `running` that makes its pool complete also makes `staging.pool_filled`.
 */
@Injectable()
export class WorkspaceWebhooks {
  @OnWorkspaceEvent({ name: 'webhooks', types: WORKSPACE_EVENT_TYPES })
  async onWorkspaceEvent(event: WorkspaceEventMessage, tx: EntityManager): Promise<void> {
    const p = event.payload;
    const extra: Record<string, unknown> = {};
    if (typeof p.reason === 'string') extra.reason = p.reason;
    await fanOut(tx, {
      type: `workspace.${event.type}` as WebhookEventType,
      orderingKey: `workspace:${event.workspaceId}`,
      occurredAt: event.createdAt,
      data: {
        workspace_id: toWireId(event.workspaceId),
        user_id: toWireId(typeof p.userId === 'string' ? p.userId : null),
        image_id: toWireId(typeof p.imageId === 'string' ? p.imageId : null),
        operational_status: event.status,
        operational_message: typeof p.operationalMessage === 'string' ? p.operationalMessage : typeof p.message === 'string' ? p.message : null,
        ...extra,
      },
    });
    if (event.type === 'running') await this.poolFilled(event, tx);
  }

  /** staging.pool_filled when this workspace's start made its pool's ready count reach num_sessions. */
  private async poolFilled(event: WorkspaceEventMessage, tx: EntityManager): Promise<void> {
    const configId = await stagingConfigOf(tx, event.workspaceId);
    if (!configId) return;
    const config = await tx.findOneBy(StagingConfig, { id: configId });
    if (!config || config.numSessions <= 0) return;
    const ready = await stagedReadyAfter(tx, configId, event.id);
    if (ready !== config.numSessions) return;
    await fanOut(tx, {
      type: 'staging.pool_filled', orderingKey: `staging:${configId}`, occurredAt: event.createdAt,
      data: { staging_config_id: toWireId(configId), image_id: toWireId(config.imageId), num_sessions: config.numSessions, ready },
    });
  }
}
