import type { WorkspaceStatus } from '../../workspace.entity';

/**
 * What can happen to a workspace, one event per transition (decisions.md, "Workspace lifecycle events"):
 * - requested: the row was made (status starting);
 * - running: its container answers (starting → running);
 * - failed: it could not start, or its container stopped or vanished (starting|running → failed);
 * - assigned: a staged workspace (no user) was handed to a user (running, user set);
 * - expired: its expiration passed; always followed by stopping in the same transaction;
 * - stopping: its removal began (→ stopping, with the reason);
 * - destroyed: its container is gone (→ deleted).
 */
export const WORKSPACE_EVENT_TYPES = ['requested', 'running', 'failed', 'assigned', 'expired', 'stopping', 'destroyed'] as const;
export type WorkspaceEventType = (typeof WORKSPACE_EVENT_TYPES)[number];

/** An event as subscribers get it. `status` is the workspace's status right after the change. */
export interface WorkspaceEventMessage {
  /** Outbox id as a decimal string (bigint): increasing in commit order. */
  id: string;
  workspaceId: string;
  type: WorkspaceEventType;
  status: WorkspaceStatus;
  payload: Record<string, unknown>;
  createdAt: Date;
}
