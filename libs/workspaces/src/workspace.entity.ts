import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, NumericColumn, TimestampColumn, UpdatedAt } from '@ws/database';
import { Image } from '@ws/images';
import type { RdpClientType, ServerProtocol, ServerSessionMode } from '@ws/images';
import { Server } from '@ws/servers';
import { User } from '@ws/users';

/**
 * Lifecycle: starting → running → stopping → deleted; starting or running → failed (container could not be
 * made or vanished) → deleted once cleaned up. `deleted` rows are history: every live query excludes them.
 */
export const WORKSPACE_STATUSES = ['starting', 'running', 'stopping', 'failed', 'deleted'] as const;
export type WorkspaceStatus = (typeof WORKSPACE_STATUSES)[number];
/** The partial unique index that keeps two live workspaces off one persistent profile. */
export const PROFILE_LOCATION_INDEX = 'uq_workspaces_live_profile_location';

/**
 * Where a workspace's persistent profile stands: `ready` once it was restored (or started empty) in the
 * container, the only state from which a removal saves it (an empty home from a failed restore must never
 * overwrite the saved profile); then `saved`, or `not_saved` (too large, or the container was gone).
 */
export type ProfileState = 'ready' | 'saved' | 'not_saved';

/** The server a server-image workspace reaches (issue 14), after the request's overrides; its password is kept apart, encrypted. */
export interface WorkspaceServerConnection {
  protocol: ServerProtocol;
  host: string;
  port: number;
  username: string;
  domain: string;
  rdpClientType: RdpClientType | null;
  mode: ServerSessionMode;
  /**
   * The address the worker resolved `host` to and checked (TargetAddressPolicy) before connecting: the gateway,
   * the bridge and the relay connect to it, never to the name again (DNS rebinding). Unset until provisioned.
   */
  address?: string;
}

/**
 * Live: every status but `deleted` (history). The one definition, in two forms: LIVE_STATUSES for queries that
 * list statuses, LIVE_SQL for raw statements (the condition the partial index ix_workspaces_live_status serves).
 */
export const LIVE_STATUSES: WorkspaceStatus[] = WORKSPACE_STATUSES.filter((status) => status !== 'deleted');
export const liveSql = (alias: string) => `${alias}.status <> 'deleted'`;

/**
 * SQL condition on a workspaces row (alias `w`): staged and never handed to anyone, the only rows a pool counts,
 * trims or hands out. `assigned_at`, not `user_id`: a user's deletion nulls user_id but never assigned_at.
 */
export const UNASSIGNED_STAGED = 'w.staging_config_id IS NOT NULL AND w.assigned_at IS NULL AND w.user_id IS NULL';

@Entity('workspaces')
@Index(['serverId', 'status'])
// Exclusivity of persistent profiles: one live workspace per profile location (the launch checks first, for a clear 409).
@Index(PROFILE_LOCATION_INDEX, ['profileLocation'], { unique: true, where: "profile_location IS NOT NULL AND status <> 'deleted'" })
// The license's seat count (live rows, staged included) under its deployment-wide lock: cheap however long the history.
@Index('ix_workspaces_live_status', ['status'], { where: "status <> 'deleted'" })
export class Workspace {
  @PrimaryColumn('uuid') id!: string;
  /**
   * Null for a staged workspace not yet handed out, and once the owner is deleted (the row stays as history). A
   * user is deleted only after their workspaces were ended (UserDeletion); a trigger on `users` refuses to delete
   * a user who still owns a starting, running or failed one, so SET NULL never orphans a live desktop.
   */
  @Index() @Column('uuid', { nullable: true }) userId!: string | null;
  @ManyToOne(() => User, { onDelete: 'SET NULL' }) @JoinColumn({ name: 'user_id' }) user?: User | null;
  /**
   * When the workspace first had a user (its launch, or the claim of a staged one); never cleared. A staged
   * workspace is handed out only while this is null: a desktop that was ever someone's never returns to a pool,
   * even if its user_id becomes null later (issue 19).
   */
  @TimestampColumn({ nullable: true }) assignedAt!: Date | null;
  @Column('uuid') imageId!: string;
  @ManyToOne(() => Image, { onDelete: 'RESTRICT' }) @JoinColumn({ name: 'image_id' }) image?: Image;
  @Column('uuid', { nullable: true }) serverId!: string | null;
  @ManyToOne(() => Server, { onDelete: 'RESTRICT' }) @JoinColumn({ name: 'server_id' }) server?: Server | null;
  @Index() @Column('text') status!: WorkspaceStatus;
  @Column('text', { default: '' }) operationalMessage!: string;
  @Column('integer', { default: 0 }) operationalProgress!: number;
  @Column('text', { nullable: true }) containerId!: string | null;
  @Column('text', { nullable: true }) containerIp!: string | null;
  /** Host ports the container's port_map entries are published on, by name (vnc, audio …). */
  @Column('jsonb', { default: () => "'{}'" }) hostPorts!: Record<string, number>;
  @NumericColumn() cores!: number;
  @BigIntColumn() memory!: number;
  /** Secret of the workspace's own connections (VNC password, gateway routing). */
  @Column('text') token!: string;
  @Column('text') viewOnlyToken!: string;
  /** The owner's session token this workspace's links are signed with; renewed by get_workspace_status. */
  @Column('uuid', { nullable: true }) sessionTokenId!: string | null;
  /** Settings of the request that the container is built from (client language, browser url …). */
  @Column('jsonb', { default: () => "'{}'" }) launchOptions!: {
    clientLanguage?: string; clientTimezone?: string; workspaceUrl?: string; containerNetwork?: string;
    /** The egress gateway the container joins (its connection is the egress_connections row of this workspace). */
    egressGatewayId?: string;
  };
  /** Set for a workspace of a server image (the server it reaches); null for a container image's. */
  @Column('jsonb', { nullable: true }) serverConnection!: WorkspaceServerConnection | null;
  /** The connection's password, AES-256-GCM under SERVER_CREDENTIALS_KEY bound to this workspace's id (ServerCredentialCipher); never returned. */
  @Column('text', { nullable: true }) serverPasswordEncrypted!: string | null;
  /**
   * The key a native RDP client's relay checks credentials with (get_rdp_client_connection_info signs with it): its
   * own secret, never mapped out, unlike `token` (which the Workspace object returns). Null unless the workspace is a relay.
   */
  @Column('text', { nullable: true }) relaySecret!: string | null;
  @Index({ unique: true }) @Column('text') shareId!: string;
  @Column('boolean', { default: false }) sharingEnabled!: boolean;
  @Column('jsonb', { default: () => "'{}'" }) environment!: Record<string, string>;
  /** Client settings this workspace has over its owner's groups' (a cast link with enforce_client_settings). */
  @Column('jsonb', { default: () => "'{}'" }) clientSettingsOverride!: Record<string, boolean>;
  @Column('text', { nullable: true }) persistentProfileMode!: string | null;
  @Column('boolean', { default: false }) isPersistentProfile!: boolean;
  /** The resolved persistent_profile_path (mode Enabled or Reset), else null. */
  @Column('text', { nullable: true }) profileLocation!: string | null;
  @Column('text', { nullable: true }) profileState!: ProfileState | null;
  /**
   * The staging config this workspace was staged for (kept after assignment as history). Staged and not yet
   * handed out: this set and assigned_at null (UNASSIGNED_STAGED). No foreign key: a deleted config's staged rows
   * are found and removed.
   */
  @Index() @Column('uuid', { nullable: true }) stagingConfigId!: string | null;
  @TimestampColumn() startDate!: Date;
  @TimestampColumn() keepaliveDate!: Date;
  @Index() @TimestampColumn() expirationDate!: Date;
  @TimestampColumn({ nullable: true }) destroyedAt!: Date | null;
  @Column('text', { nullable: true }) destroyReason!: string | null;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}
