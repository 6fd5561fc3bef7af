import type { EntityManager } from 'typeorm';
import type { WorkspaceEventType } from './workspace-event-types';

export interface PendingEvent {
  type: WorkspaceEventType;
  payload: Record<string, unknown>;
}

/** Held from drawing an event id to the commit: ids then become visible in increasing order (no gaps a reader could pass). */
const OUTBOX_LOCK_KEY = 0x77735f65; // "ws_e"

/**
 * Writes events to the outbox inside `tx`. It takes a transaction-scoped advisory lock first, so writers of
 * events commit one after another in id order: a relay that has read event n can never later see a
 * smaller id commit. Call it last in the transaction (nothing else is locked after it, so no deadlock),
 * and commit soon: other state changes wait for this commit.
 */
export async function appendWorkspaceEvents(tx: EntityManager, workspaceId: string, events: PendingEvent[]): Promise<void> {
  if (events.length === 0) return;
  await tx.query('SELECT pg_advisory_xact_lock($1)', [OUTBOX_LOCK_KEY]);
  const values = events.map((_, i) => `($1, $${i * 2 + 2}, $${i * 2 + 3}::jsonb)`).join(', ');
  await tx.query(
    `INSERT INTO workspace_events (workspace_id, type, payload) VALUES ${values}`,
    [workspaceId, ...events.flatMap((e) => [e.type, JSON.stringify(e.payload)])],
  );
}

/**
 * How many workspaces of a staging config were ready (running, not yet assigned, not stopping or failed) right
 * after outbox event `eventId`, read from the outbox itself, so a reader relaying events later gets the count as
 * of that event (the webhooks' staging.pool_filled).
 */
export async function stagedReadyAfter(tx: EntityManager, stagingConfigId: string, eventId: string): Promise<number> {
  const [row] = (await tx.query(
    `SELECT count(DISTINCT e.workspace_id)::int AS ready
       FROM workspace_events e JOIN workspaces w ON w.id = e.workspace_id
      WHERE w.staging_config_id = $1 AND e.type = 'running' AND e.id <= $2
        AND NOT EXISTS (SELECT 1 FROM workspace_events x WHERE x.workspace_id = e.workspace_id AND x.id <= $2 AND x.type IN ('assigned', 'stopping', 'failed'))`,
    [stagingConfigId, eventId],
  )) as Array<{ ready: number }>;
  return row?.ready ?? 0;
}

/** The staging config a workspace was started for (null when it was started for a user). */
export async function stagingConfigOf(tx: EntityManager, workspaceId: string): Promise<string | null> {
  const [row] = (await tx.query('SELECT staging_config_id FROM workspaces WHERE id = $1', [workspaceId])) as Array<{ staging_config_id: string | null }>;
  return row?.staging_config_id ?? null;
}
