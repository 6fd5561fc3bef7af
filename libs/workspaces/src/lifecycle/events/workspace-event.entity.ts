import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, TimestampColumn, UpdatedAt } from '@ws/database';
import type { WorkspaceEventType } from './workspace-event-types';

/**
 * The outbox: one row per workspace state change, written in the transaction that made the change. Ids
 * grow in commit order (the writer holds a lock from the id's draw to the commit, see WorkspaceLifecycle),
 * so a reader that has seen id n has seen every committed id below n.
 */
@Entity('workspace_events')
@Index(['workspaceId', 'id'])
export class WorkspaceEvent {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;
  /** No foreign key: the history outlives nothing, but events must never block deleting a row. */
  @Column('uuid') workspaceId!: string;
  @Column('text') type!: WorkspaceEventType;
  @Column('jsonb', { default: () => "'{}'" }) payload!: Record<string, unknown>;
  @Index() @CreatedAt() createdAt!: Date;
}

/** How far one subscriber has been handed the outbox: every event up to lastEventId is delivered (or given up on). */
@Entity('workspace_event_cursors')
export class WorkspaceEventCursor {
  @PrimaryColumn('text') subscriber!: string;
  @BigIntColumn({ default: 0 }) lastEventId!: number;
  /** Failed deliveries of the next event; the relay waits until retryAfter before trying it again. */
  @Column('integer', { default: 0 }) attempts!: number;
  @TimestampColumn({ nullable: true }) retryAfter!: Date | null;
  @Column('text', { nullable: true }) lastError!: string | null;
  @UpdatedAt() updatedAt!: Date;
}

/**
 * One row per event handed to a subscriber, committed with the cursor's advance: the record of what was
 * delivered, in which order, by which worker. `failed` rows are events given up on after the subscriber's
 * attempts ran out.
 */
@Entity('workspace_event_deliveries')
@Index(['subscriber', 'eventId'])
export class WorkspaceEventDelivery {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;
  @Column('text') subscriber!: string;
  @BigIntColumn() eventId!: number;
  @Column('uuid') workspaceId!: string;
  @Column('boolean', { default: false }) failed!: boolean;
  /** host:pid of the relaying process. */
  @Column('text') deliveredBy!: string;
  @CreatedAt() deliveredAt!: Date;
}
