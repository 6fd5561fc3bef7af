import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, TimestampColumn, UpdatedAt } from '@ws/database';
import type { WorkspaceEventType } from './workspace-event-types';

/**
 * The outbox: one row per workspace state change, written in the transaction that made the change, with no
 * lock of its own: ids are drawn in any order across workspaces. Per workspace they grow in commit order (each
 * writer holds the workspace's row, or writes its workspace's events one transaction after another). The relay's
 * sequencer gives committed events their delivery position `seq` (WorkspaceEventRelay.sequence): positions
 * become visible in increasing order, so a reader that has seen position n has seen every position below n.
 */
@Entity('workspace_events')
@Index(['workspaceId', 'id'])
@Index('IDX_workspace_events_seq', ['seq'], { unique: true })
@Index('IDX_workspace_events_unsequenced', ['id'], { where: 'seq IS NULL' })
export class WorkspaceEvent {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;
  /** No foreign key: the history outlives nothing, but events must never block deleting a row. */
  @Column('uuid') workspaceId!: string;
  @Column('text') type!: WorkspaceEventType;
  @Column('jsonb', { default: () => "'{}'" }) payload!: Record<string, unknown>;
  /** Delivery position, given after the commit by the relay's sequencer (null until then). */
  @Column('bigint', { nullable: true }) seq!: string | null;
  @Index() @CreatedAt() createdAt!: Date;
}

/** The sequencer's one row: the last delivery position given. Its row lock makes sequencers take turns. */
@Entity('workspace_event_sequencer')
export class WorkspaceEventSequencer {
  @PrimaryColumn('smallint', { primaryKeyConstraintName: 'PK_workspace_event_sequencer' }) id!: number;
  @BigIntColumn() lastSeq!: number;
}

/** How far one subscriber has been handed the outbox: every event up to position (seq) lastEventId is delivered (or given up on). */
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
