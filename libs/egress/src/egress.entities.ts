import { Check, Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, UpdatedAt } from '@ws/database';
import { Group } from '@ws/groups';
import { Image } from '@ws/images';
import { User } from '@ws/users';

/**
 * The kinds of egress provider, and the credential field each one requires:
 * - `username_password_vpn`: a VPN that logs in with username and password (OpenVPN, IPsec with XAuth…): `username` + `password`;
 * - `key_pair_tunnel`: a tunnel authenticated by a private key (WireGuard…): `vpn_private_key`;
 * - `mesh_network`: a mesh network joined with an auth key (Tailscale, ZeroTier, Nebula…): `mesh_key`;
 * - `custom`: anything else, one opaque secret the container's egress script understands: `custom_credential`.
 */
export const EGRESS_PROVIDER_TYPES = ['username_password_vpn', 'key_pair_tunnel', 'mesh_network', 'custom'] as const;
export type EgressProviderType = (typeof EGRESS_PROVIDER_TYPES)[number];

/** A VPN or tunnel service that workspaces can send their traffic through. */
@Entity('egress_providers')
@Check('ck_egress_providers_type', `"type" IN ('username_password_vpn', 'key_pair_tunnel', 'mesh_network', 'custom')`)
export class EgressProvider {
  @PrimaryColumn('uuid') id!: string;
  @Index({ unique: true }) @Column('text') name!: string;
  @Column('text') type!: EgressProviderType;
  @CreatedAt() createdAt!: Date;
}

/** One exit point of a provider (a VPN server, a tunnel peer, a mesh exit node). */
@Entity('egress_gateways')
@Index('uq_egress_gateways_provider_name', ['providerId', 'name'], { unique: true })
export class EgressGateway {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid') providerId!: string;
  @ManyToOne(() => EgressProvider, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'provider_id' }) provider?: EgressProvider;
  @Column('text') name!: string;
  /** Where the container connects: host:port, a URL or a peer address, as the provider type reads it. */
  @Column('text', { default: '' }) endpoint!: string;
  /** Provider-specific settings handed to the container as they are (a WireGuard peer key, an OpenVPN config…). */
  @Column('jsonb', { default: () => "'{}'" }) config!: Record<string, unknown>;
  @CreatedAt() createdAt!: Date;
}

/**
 * The secret a workspace uses to join a provider's gateways, attached to exactly one user, group or image
 * (the CHECK). Secrets are stored as given: the container needs them in clear; responses mask them.
 */
@Entity('egress_credentials')
@Check('ck_egress_credentials_one_owner', 'num_nonnulls("user_id", "group_id", "image_id") = 1')
@Check('ck_egress_credentials_limit', '"active_connection_limit" IS NULL OR "active_connection_limit" > 0')
@Check('ck_egress_credentials_limited', 'NOT "limit_active_connections" OR "active_connection_limit" IS NOT NULL')
export class EgressCredential {
  @PrimaryColumn('uuid') id!: string;
  @Column('text') name!: string;
  @Index() @Column('uuid') providerId!: string;
  @ManyToOne(() => EgressProvider, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'provider_id' }) provider?: EgressProvider;
  @Column('boolean', { default: true }) enabled!: boolean;
  @Column('text', { nullable: true }) username!: string | null;
  @Column('text', { nullable: true }) password!: string | null;
  @Column('text', { nullable: true }) vpnPrivateKey!: string | null;
  @Column('text', { nullable: true }) meshKey!: string | null;
  @Column('text', { nullable: true }) customCredential!: string | null;
  @Index() @Column('uuid', { nullable: true }) userId!: string | null;
  @ManyToOne(() => User, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'user_id' }) user?: User | null;
  @Index() @Column('uuid', { nullable: true }) groupId!: string | null;
  @ManyToOne(() => Group, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'group_id' }) group?: Group | null;
  @Index() @Column('uuid', { nullable: true }) imageId!: string | null;
  @ManyToOne(() => Image, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'image_id' }) image?: Image | null;
  /** False: only the gateways in egress_credential_gateways. */
  @Column('boolean', { default: false }) allowAllGateways!: boolean;
  @Column('boolean', { default: false }) limitActiveConnections!: boolean;
  /** Kept while limitActiveConnections is off, so switching the limit back on restores it. */
  @Column('integer', { nullable: true }) activeConnectionLimit!: number | null;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}

/** The gateways a credential with allow_all_gateways false may use (each of the credential's provider). */
@Entity('egress_credential_gateways')
export class EgressCredentialGateway {
  @PrimaryColumn('uuid') credentialId!: string;
  @ManyToOne(() => EgressCredential, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'credential_id' }) credential?: EgressCredential;
  @Index() @PrimaryColumn('uuid') gatewayId!: string;
  @ManyToOne(() => EgressGateway, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'gateway_id' }) gateway?: EgressGateway;
}

/**
 * One workspace's use of a credential: the live `active_connections` is the count of rows. No foreign key to
 * workspaces: the launch reserves before it inserts the workspace row (same transaction), and release by
 * workspace id is idempotent. Deleting a credential (or its user, group, image) drops its rows.
 */
@Entity('egress_connections')
export class EgressConnection {
  @PrimaryColumn('uuid') workspaceId!: string;
  @Index() @Column('uuid') credentialId!: string;
  @ManyToOne(() => EgressCredential, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'credential_id' }) credential?: EgressCredential;
  @Column('uuid', { nullable: true }) gatewayId!: string | null;
  @ManyToOne(() => EgressGateway, { onDelete: 'SET NULL' }) @JoinColumn({ name: 'gateway_id' }) gateway?: EgressGateway | null;
  @CreatedAt() createdAt!: Date;
}

export const EGRESS_ENTITIES = [EgressProvider, EgressGateway, EgressCredential, EgressCredentialGateway, EgressConnection];
