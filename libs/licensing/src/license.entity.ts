import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { TimestampColumn } from '@ws/database';

/**
 * An activated license: the signed key as presented (re-verified on every load, so a row written by hand or a
 * withdrawn issuer key grants nothing) and what the activation chose. The newest activation applies; activating
 * the same license_id again replaces its row. Changes notify `license_changed` (trigger in the migration).
 */
@Entity('licenses')
export class License {
  /** The issuer's license_id, as signed (text: another issuer's ids need not be UUIDs). */
  @PrimaryColumn('text') licenseId!: string;
  @Column('text') activationKey!: string;
  /** Concurrent workspaces this deployment applies: at most the entitlement's limit. */
  @Column('integer') seats!: number;
  /** The key's issued_to, or the activation's when the key left it empty. */
  @Column('text') issuedTo!: string;
  @Index() @TimestampColumn() activatedAt!: Date;
}
