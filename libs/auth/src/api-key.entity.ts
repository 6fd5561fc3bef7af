import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { CreatedAt, TimestampColumn } from '@ws/database';
import type { Permission } from './permissions';

/** An integrator's credential. The secret is stored as SHA-256: it is 256 random bits, so a slow hash adds nothing. */
@Entity('api_keys')
export class ApiKey {
  @PrimaryColumn('uuid') id!: string;
  /** The public half, sent as `api_key`. */
  @Index({ unique: true }) @Column('text') apiKey!: string;
  @Column('text') name!: string;
  @Column('text') secretSha256!: string;
  @Column('text', { array: true, default: () => "'{}'" }) permissions!: Permission[];
  @Column('boolean', { default: false }) readOnly!: boolean;
  @TimestampColumn({ nullable: true }) expiresAt!: Date | null;
  @TimestampColumn({ nullable: true }) revokedAt!: Date | null;
  @CreatedAt() createdAt!: Date;
}
