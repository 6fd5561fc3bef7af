import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { TimestampColumn } from '@ws/database';
import { ApiKey } from '../api-key.entity';

/**
 * One `Idempotency-Key` an API key sent with a creating operation: the request's fingerprint, who holds it
 * (`claim`, while the first request runs) and, once answered, the answer to replay. Removed 24 hours after
 * `created_at` by the worker (maintenance.expire-idempotency-keys), and with its API key.
 */
@Entity('idempotency_keys')
export class IdempotencyKey {
  @PrimaryColumn('uuid') apiKeyId!: string;
  @PrimaryColumn('text') key!: string;
  @ManyToOne(() => ApiKey, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'api_key_id' }) apiKeyRow?: ApiKey;
  @Column('text') operation!: string;
  /** SHA-256 (hex) of the body's canonical JSON, credentials left out. */
  @Column('text') requestSha256!: string;
  /** Names the request that runs it: only that request stores its answer or releases the key. */
  @Column('uuid') claim!: string;
  @TimestampColumn() claimedAt!: Date;
  /** Null while the first request runs. */
  @Column('integer', { nullable: true }) statusCode!: number | null;
  /** The answer's JSON text, as sent. */
  @Column('text', { nullable: true }) responseBody!: string | null;
  @Index() @TimestampColumn() createdAt!: Date;
}
