import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, TimestampColumn, UpdatedAt } from '@ws/database';

/** A receiver of signed event deliveries (Standard Webhooks). */
@Entity('webhooks')
export class Webhook {
  @PrimaryColumn('uuid') id!: string;
  @Column('text') url!: string;
  /** Event types it receives; empty: all. */
  @Column('text', { array: true, default: () => "'{}'" }) events!: string[];
  @Column('text', { nullable: true }) description!: string | null;
  @Column('boolean', { default: true }) enabled!: boolean;
  /** Why delivery stopped by itself (a 410 from the receiver); null when enabled or disabled by update_webhook. */
  @Column('text', { nullable: true }) disabledReason!: string | null;
  /** The signing secret (`whsec_…`), encrypted when SERVER_CREDENTIALS_KEY is set (see webhook-secrets.ts). */
  @Column('text') secret!: string;
  /** The secret before the last rotation, still signing deliveries until previousSecretUntil. */
  @Column('text', { nullable: true }) previousSecret!: string | null;
  @TimestampColumn({ nullable: true }) previousSecretUntil!: Date | null;
  /** The worker process serving this endpoint's deliveries, until leaseUntil (renewed while it serves). */
  @Column('text', { nullable: true }) leaseOwner!: string | null;
  @TimestampColumn({ nullable: true }) leaseUntil!: Date | null;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}

export type WebhookMessageState = 'pending' | 'delivered' | 'failed' | 'cancelled';

/**
 * One event for one endpoint: the queue of deliveries. Written in the transaction that read the event from its
 * outbox, so each event becomes one message per endpoint exactly once. `body` is the exact JSON that is signed
 * and sent on every attempt. Messages of one ordering key (a workspace, a user, a staging config) go out one
 * after another in id order; other keys do not wait for them.
 */
@Entity('webhook_messages')
@Index('IDX_webhook_messages_queue', ['webhookId', 'state', 'orderingKey', 'id'])
@Index('IDX_webhook_messages_due', ['state', 'nextAttemptAt'])
export class WebhookMessage {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;
  @Column('uuid') webhookId!: string;
  @ManyToOne(() => Webhook, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'webhook_id' }) webhook?: Webhook;
  @Column('text') eventType!: string;
  @Column('text') orderingKey!: string;
  @Column('text') body!: string;
  @Column('text', { default: 'pending' }) state!: WebhookMessageState;
  @Column('integer', { default: 0 }) attempts!: number;
  @TimestampColumn({ default: () => 'now()' }) nextAttemptAt!: Date;
  @Column('text', { nullable: true }) lastError!: string | null;
  @Index('IDX_webhook_messages_created') @CreatedAt() createdAt!: Date;
  @TimestampColumn({ nullable: true }) finishedAt!: Date | null;
}

/** One delivery attempt (get_webhook_deliveries): status code, duration and error. */
@Entity('webhook_attempts')
@Index('IDX_webhook_attempts_webhook', ['webhookId', 'id'])
export class WebhookAttempt {
  @PrimaryGeneratedColumn('increment', { type: 'bigint' }) id!: string;
  @Column('uuid') webhookId!: string;
  @ManyToOne(() => Webhook, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'webhook_id' }) webhook?: Webhook;
  /** No foreign key: messages are pruned apart. */
  @BigIntColumn() messageId!: number;
  @Column('text') eventType!: string;
  @Column('integer') attempt!: number;
  @Column('integer', { nullable: true }) statusCode!: number | null;
  @Column('integer') durationMs!: number;
  @Column('boolean') succeeded!: boolean;
  @Column('text', { nullable: true }) error!: string | null;
  @Index('IDX_webhook_attempts_created') @CreatedAt() attemptedAt!: Date;
}

/** How far the webhooks have read an outbox other than the workspaces' (which has its own cursors): `users`. */
@Entity('webhook_feed_cursors')
export class WebhookFeedCursor {
  @PrimaryColumn('text') feed!: string;
  @BigIntColumn({ default: 0 }) lastEventId!: number;
  @UpdatedAt() updatedAt!: Date;
}
