import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, TimestampColumn, UpdatedAt } from '@ws/database';
import { CONFIG_CLIENT_SETTING_FLAGS, Group } from '@ws/groups';
import { Image } from '@ws/images';

/**
 * A public launch link: a person opening `/#/cast/<key>` gets a workspace of `imageId` under the rules of
 * this row (referrers, validity, session and address limits, login or anonymous, captcha, client settings).
 */
@Entity('cast_configs')
export class CastConfig {
  @PrimaryColumn('uuid') id!: string;
  @Column('text') name!: string;
  @Column('uuid') imageId!: string;
  @ManyToOne(() => Image, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'image_id' }) image?: Image;
  /** The cast URL's last segment; unique. */
  @Index({ unique: true }) @Column('text') key!: string;
  /** Hosts a visitor's Referer must name; empty: any (or none). */
  @Column('text', { array: true, default: () => "'{}'" }) allowedReferrers!: string[];
  @Column('boolean') limitSessions!: boolean;
  /** Sessions still allowed while limitSessions; decremented by a conditional UPDATE per launch, never below 0. */
  @Column('integer') sessionRemaining!: number;
  @Column('boolean') limitIps!: boolean;
  @Column('integer') ipRequestLimit!: number;
  @Column('integer') ipRequestSeconds!: number;
  @Column('text', { nullable: true }) errorUrl!: string | null;
  @Column('boolean') enableSharing!: boolean;
  @Column('boolean') disableControlPanel!: boolean;
  @Column('boolean') disableTips!: boolean;
  @Column('boolean') disableFixedRes!: boolean;
  @Column('boolean') allowAnonymous!: boolean;
  /** Anonymous visitors' users are put in this group besides All Users. */
  @Column('uuid', { nullable: true }) groupId!: string | null;
  @ManyToOne(() => Group, { onDelete: 'SET NULL' }) @JoinColumn({ name: 'group_id' }) group?: Group | null;
  @Column('boolean') requireRecaptcha!: boolean;
  @Column('text', { nullable: true }) workspaceUrl!: string | null;
  @Column('boolean') dynamicWorkspaceUrl!: boolean;
  @Column('boolean') dynamicContainerNetwork!: boolean;
  @Column('boolean') allowResume!: boolean;
  @Column('boolean') enforceClientSettings!: boolean;
  @Column('boolean') allowWorkspaceAudio!: boolean;
  @Column('boolean') allowWorkspaceUploads!: boolean;
  @Column('boolean') allowWorkspaceDownloads!: boolean;
  @Column('boolean') allowWorkspaceClipboardDown!: boolean;
  @Column('boolean') allowWorkspaceClipboardUp!: boolean;
  @Column('boolean') allowWorkspaceMicrophone!: boolean;
  @Column('boolean') allowWorkspaceSharing!: boolean;
  @Column('boolean') workspaceAudioDefaultOn!: boolean;
  @Column('boolean') workspaceImeModeDefaultOn!: boolean;
  @TimestampColumn({ nullable: true }) validUntil!: Date | null;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}

/** The config's boolean fields, wire name → entity property (create defaults, update, response). */
export const CAST_FLAGS = {
  limit_sessions: 'limitSessions',
  limit_ips: 'limitIps',
  enable_sharing: 'enableSharing',
  disable_control_panel: 'disableControlPanel',
  disable_tips: 'disableTips',
  disable_fixed_res: 'disableFixedRes',
  allow_anonymous: 'allowAnonymous',
  require_recaptcha: 'requireRecaptcha',
  dynamic_workspace_url: 'dynamicWorkspaceUrl',
  dynamic_container_network: 'dynamicContainerNetwork',
  allow_resume: 'allowResume',
  enforce_client_settings: 'enforceClientSettings',
  ...CONFIG_CLIENT_SETTING_FLAGS,
  allow_workspace_sharing: 'allowWorkspaceSharing',
  workspace_audio_default_on: 'workspaceAudioDefaultOn',
  workspace_ime_mode_default_on: 'workspaceImeModeDefaultOn',
} as const;
export type CastFlag = keyof typeof CAST_FLAGS;
export const CAST_FLAG_NAMES = Object.keys(CAST_FLAGS) as CastFlag[];

/** The client settings a config enforces on its sessions with enforce_client_settings. */
export const ENFORCED_CLIENT_SETTINGS = [
  'allow_workspace_audio', 'allow_workspace_uploads', 'allow_workspace_downloads', 'allow_workspace_clipboard_down', 'allow_workspace_clipboard_up',
  'allow_workspace_microphone', 'allow_workspace_sharing', 'workspace_audio_default_on', 'workspace_ime_mode_default_on',
] as const satisfies readonly CastFlag[];
