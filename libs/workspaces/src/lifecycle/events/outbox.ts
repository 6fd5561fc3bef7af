import type { EntityManager } from 'typeorm';
import type { WorkspaceEventType } from './workspace-event-types';

export interface PendingEvent {
  type: WorkspaceEventType;
  payload: Record<string, unknown>;
}

/**
 * Writes events to the outbox inside `tx`, with no lock of its own: the events take a delivery position only
 * after they commit (the relay's sequencer, WorkspaceEventRelay.sequence), so writers on different workspaces
 * never wait for one another. Per workspace, ids follow commit order because the caller holds the workspace's
 * row (it changed its status in `tx`) or writes that workspace's events one transaction after another.
 */
export async function appendWorkspaceEvents(tx: EntityManager, workspaceId: string, events: PendingEvent[]): Promise<void> {
  if (events.length === 0) return;
  const values = events.map((_, i) => `($1, $${i * 2 + 2}, $${i * 2 + 3}::jsonb)`).join(', ');
  await tx.query(
    `INSERT INTO workspace_events (workspace_id, type, payload) VALUES ${values}`,
    [workspaceId, ...events.flatMap((e) => [e.type, JSON.stringify(e.payload)])],
  );
}

/**
 * How many workspaces of a staging config were ready (running, not yet assigned, not stopping or failed) right
 * after outbox event `eventId` in delivery order (positions up to its `seq`), read from the outbox itself, so a reader relaying events later gets the count as
 * of that event (the webhooks' staging.pool_filled).
 */
export async function stagedReadyAfter(tx: EntityManager, stagingConfigId: string, eventId: string): Promise<number> {
  const [row] = (await tx.query(
    `SELECT count(DISTINCT e.workspace_id)::int AS ready
       FROM workspace_events e JOIN workspaces w ON w.id = e.workspace_id
      WHERE w.staging_config_id = $1 AND e.type = 'running' AND e.seq <= (SELECT seq FROM workspace_events WHERE id = $2)
        AND NOT EXISTS (SELECT 1 FROM workspace_events x WHERE x.workspace_id = e.workspace_id AND x.seq <= (SELECT seq FROM workspace_events WHERE id = $2) AND x.type IN ('assigned', 'stopping', 'failed'))`,
    [stagingConfigId, eventId],
  )) as Array<{ ready: number }>;
  return row?.ready ?? 0;
}

/** The staging config a workspace was started for (null when it was started for a user). */
export async function stagingConfigOf(tx: EntityManager, workspaceId: string): Promise<string | null> {
  const [row] = (await tx.query('SELECT staging_config_id FROM workspaces WHERE id = $1', [workspaceId])) as Array<{ staging_config_id: string | null }>;
  return row?.staging_config_id ?? null;
}
