import { Column, Entity, PrimaryColumn } from 'typeorm';
import { BigIntColumn, TimestampColumn } from '@ws/database';

/**
 * The pointer to the current generation of one persistent profile. A save writes a new `<uuid>.tar` object,
 * verifies it, then switches this row in one transaction; readers only ever follow this row, so a failed or
 * killed save leaves the previous generation in use.
 */
@Entity('persistent_profiles')
export class PersistentProfile {
  /** The resolved persistent_profile_path (file://… or s3://…): the store the generations live in. */
  @PrimaryColumn('text') location!: string;
  /** The current generation's object key in that store (`<uuid>.tar`). */
  @Column('text') objectKey!: string;
  @BigIntColumn() size!: number;
  /** Hex SHA-256 of the object, checked when it is restored. */
  @Column('text') sha256!: string;
  @TimestampColumn() savedAt!: Date;
  /** The workspace whose removal saved it (history; no foreign key). */
  @Column('uuid', { nullable: true }) savedByWorkspaceId!: string | null;
}
