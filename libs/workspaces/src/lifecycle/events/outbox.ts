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
