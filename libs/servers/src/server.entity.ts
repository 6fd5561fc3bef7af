import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, NumericColumn, TimestampColumn } from '@ws/database';
import { Zone } from '@ws/zones';

export type ServerHealthState = 'up' | 'down';

/** A Docker host that runs workspaces. Capacity is reserved by summing its live workspaces under a row lock. */
@Entity('servers')
export class Server {
  @PrimaryColumn('uuid') id!: string;
  @Index({ unique: true }) @Column('text') hostname!: string;
  /** unix:///var/run/docker.sock, tcp://host:2376 (TLS files below), or ssh://user@host. */
  @Column('text') dockerEndpoint!: string;
  @Column('text', { nullable: true }) tlsCaPath!: string | null;
  @Column('text', { nullable: true }) tlsCertPath!: string | null;
  @Column('text', { nullable: true }) tlsKeyPath!: string | null;
  /** Address the api reaches the host's published ports at (127.0.0.1 for the local engine). */
  @Column('text', { default: '127.0.0.1' }) publishHost!: string;
  @Index() @Column('uuid') zoneId!: string;
  @ManyToOne(() => Zone, { onDelete: 'RESTRICT' }) @JoinColumn({ name: 'zone_id' }) zone?: Zone;
  @Column('boolean', { default: true }) enabled!: boolean;
  @NumericColumn() cores!: number;
  /** Bytes. */
  @BigIntColumn() memory!: number;
  /**
   * Placement offers cores × this (each workspace keeps its own hard limit): idle desktops use a fraction of
   * their cores, so 4 lets a 2-core host run 8 one-core desktops. README "Capacity".
   */
  @NumericColumn({ default: 4 }) cpuOvercommit!: number;
  /** Placement offers memory × this; above 1 a busy host can OOM-kill workspaces, so the default is 1. */
  @NumericColumn({ default: 1 }) memoryOvercommit!: number;
  /** What images with cpu_allocation_method Inherit get: Quotas (hard limit) or Shares (proportional). */
  @Column('text', { default: 'Quotas' }) cpuAllocationMethod!: string;
  @Column('text', { default: 'docker' }) provider!: string;
  /** The worker's periodic check (ServerHealth): a `down` server gets no new workspaces; its own stay. */
  @Column('text', { default: 'up' }) health!: ServerHealthState;
  /** Why the last check failed (null while up). */
  @Column('text', { nullable: true }) healthReason!: string | null;
  @TimestampColumn({ nullable: true }) healthCheckedAt!: Date | null;
  /** When the first failed check of this outage ran (null while up). */
  @TimestampColumn({ nullable: true }) downSince!: Date | null;
  /** When the image inventory (server_images) was last taken; null: never, and placement assumes it may hold any image. */
  @TimestampColumn({ nullable: true }) imagesCheckedAt!: Date | null;
  @CreatedAt() createdAt!: Date;
}
