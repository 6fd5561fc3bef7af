import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, NumericColumn, UpdatedAt } from '@ws/database';
import { CONFIG_CLIENT_SETTING_FLAGS } from '@ws/groups';
import { Image } from '@ws/images';
import { Zone } from '@ws/zones';

/**
 * A pool of pre-started workspaces of one image in one zone, for users whose effective client-setting flags
 * equal the config's six allow_* flags. Its staged workspaces are `workspaces` rows with this id in
 * `staging_config_id` and no user until a request claims one.
 */
@Entity('staging_configs')
@Index(['imageId', 'zoneId'])
export class StagingConfig {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid') zoneId!: string;
  @ManyToOne(() => Zone, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'zone_id' }) zone?: Zone;
  @Column('uuid') imageId!: string;
  @ManyToOne(() => Image, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'image_id' }) image?: Image;
  /** How many unassigned staged workspaces the reconciler keeps. */
  @Column('integer') numSessions!: number;
  /** Hours an unassigned staged workspace lives before it is destroyed and recreated (fractions allowed). */
  @NumericColumn() expiration!: number;
  @Column('boolean') allowWorkspaceAudio!: boolean;
  @Column('boolean') allowWorkspaceUploads!: boolean;
  @Column('boolean') allowWorkspaceDownloads!: boolean;
  @Column('boolean') allowWorkspaceClipboardDown!: boolean;
  @Column('boolean') allowWorkspaceClipboardUp!: boolean;
  @Column('boolean') allowWorkspaceMicrophone!: boolean;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}

/** The client-setting flags a staging config is matched on, wire name → entity property. */
export const STAGING_FLAGS = CONFIG_CLIENT_SETTING_FLAGS;
export type StagingFlag = keyof typeof STAGING_FLAGS;
export const STAGING_FLAG_NAMES = Object.keys(STAGING_FLAGS) as StagingFlag[];
