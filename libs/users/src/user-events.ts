import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import type { EntityManager } from 'typeorm';
import { CreatedAt } from '@ws/database';

/** What can happen to a named user (anonymous users make no events): the webhooks' user.* events (issue 22). */
export const USER_EVENT_TYPES = ['created', 'updated', 'deleted'] as const;
export type UserEventType = (typeof USER_EVENT_TYPES)[number];

/**
 * The users' outbox: one row per change of a named user, written in the transaction that made it, so a reader
 * (the webhooks feed) sees every committed change once, in commit order. The smallest equivalent of the workspace
 * outbox: no subscribers table of its own; its one reader keeps its position itself.
 */
@Entity('user_events')
export class UserEvent {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;
  /** No foreign key: a deleted user's events outlive the row. */
  @Column('uuid') userId!: string;
  @Column('text') type!: UserEventType;
  @Column('jsonb', { default: () => "'{}'" }) payload!: Record<string, unknown>;
  @Index() @CreatedAt() createdAt!: Date;
}

/** A user event as its reader gets it. */
export interface UserEventMessage {
  id: string;
  userId: string;
  type: UserEventType;
  payload: Record<string, unknown>;
  createdAt: Date;
}

/** Held from drawing an event id to the commit, as the workspace outbox does: ids become visible in increasing order. */
const USER_OUTBOX_LOCK_KEY = 0x77735f75; // "ws_u"

/** Adds one event inside `tx`; call it last in the transaction (its lock is held to the commit). */
export async function appendUserEvent(tx: EntityManager, userId: string, type: UserEventType, payload: Record<string, unknown>): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1)', [USER_OUTBOX_LOCK_KEY]);
  await tx.query('INSERT INTO user_events (user_id, type, payload) VALUES ($1, $2, $3::jsonb)', [userId, type, JSON.stringify(payload)]);
}

/** Committed events after `afterId`, in id (commit) order, at most `limit`. */
export async function userEventsAfter(tx: EntityManager, afterId: string, limit: number): Promise<UserEventMessage[]> {
  const rows = (await tx.query(
    'SELECT id, user_id, type, payload, created_at FROM user_events WHERE id > $1 ORDER BY id LIMIT $2',
    [afterId, limit],
  )) as Array<{ id: string; user_id: string; type: UserEventType; payload: Record<string, unknown>; created_at: Date }>;
  return rows.map((r) => ({ id: String(r.id), userId: r.user_id, type: r.type, payload: r.payload, createdAt: r.created_at }));
}

/** The newest event id (0 when none): where a new reader starts. */
export async function lastUserEventId(tx: EntityManager): Promise<string> {
  const [row] = (await tx.query('SELECT COALESCE(MAX(id), 0) AS id FROM user_events')) as Array<{ id: string }>;
  return String(row.id);
}

/** Deletes events older than `days`; answers how many. */
export async function pruneUserEvents(tx: EntityManager, days: number): Promise<number> {
  const [, count] = (await tx.query(`DELETE FROM user_events WHERE created_at < now() - $1::interval`, [`${days} days`])) as [unknown, number];
  return count;
}
