import { Column, Entity, Index, JoinColumn, ManyToOne, OneToMany, PrimaryColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, NumericColumn, UpdatedAt } from '@ws/database';

export interface ExecConfig {
  first_launch?: { environment?: Record<string, string>; cmd?: string };
  go?: { cmd?: string };
}

export type ImageKind = 'container' | 'server';

/** A template workspaces are made from: a container image reference plus its resources and settings. */
@Entity('images')
export class Image {
  @PrimaryColumn('uuid') id!: string;
  /** The container image reference, e.g. workspace-server/desktop:<hash>; for a server image, server:<protocol>. */
  @Column('text') name!: string;
  /** 'container' starts a container; 'server' reaches the existing server of its server_targets row (issue 14). */
  @Column('text', { default: 'container' }) kind!: ImageKind;
  @Index({ unique: true }) @Column('text') friendlyName!: string;
  @Column('text', { default: '' }) description!: string;
  /** Thumbnail url shown by clients. */
  @Column('text', { default: '' }) imageSrc!: string;
  @NumericColumn({ default: 1 }) cores!: number;
  /** Bytes. */
  @BigIntColumn({ default: 2147483648 }) memory!: number;
  @Column('integer', { default: 1280 }) xRes!: number;
  @Column('integer', { default: 720 }) yRes!: number;
  @Column('text', { default: 'Inherit' }) cpuAllocationMethod!: string;
  @Column('boolean', { default: true }) enabled!: boolean;
  /** Browser images take request_workspace's workspace_url as WORKSPACE_URL. */
  @Column('boolean', { default: false }) isBrowser!: boolean;
  @Column('boolean', { default: false }) restrictToNetwork!: boolean;
  @Column('text', { nullable: true }) networkName!: string | null;
  /** Docker networks a cast visitor may put the container on (`container_network`); empty: no selection. */
  @Column('text', { array: true, default: () => "'{}'" }) selectableNetworks!: string[];
  @Column('boolean', { default: false }) restrictToZone!: boolean;
  @Column('uuid', { nullable: true }) zoneId!: string | null;
  @Column('boolean', { default: false }) restrictToServer!: boolean;
  @Column('uuid', { nullable: true }) serverId!: string | null;
  @Column('text', { nullable: true }) persistentProfilePath!: string | null;
  @Column('text', { nullable: true }) containerRegistry!: string | null;
  @Column('text', { nullable: true }) containerUser!: string | null;
  @Column('text', { nullable: true }) containerToken!: string | null;
  @Column('text', { nullable: true }) hash!: string | null;
  @Column('jsonb', { default: () => "'{}'" }) volumeMappings!: Record<string, unknown>;
  @Column('jsonb', { default: () => "'{}'" }) persistentProfileConfig!: Record<string, unknown>;
  @Column('jsonb', { default: () => "'{}'" }) runConfig!: Record<string, unknown>;
  @Column('jsonb', { default: () => "'{}'" }) execConfig!: ExecConfig;
  @OneToMany(() => ImageAttribute, (a) => a.image) attributes?: ImageAttribute[];
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}

/** Free-form image attributes; category `port_map` names the container ports (vnc → 5900/tcp). */
@Entity('image_attributes')
@Index(['imageId', 'category', 'name'], { unique: true })
export class ImageAttribute {
  @PrimaryColumn('uuid') id!: string;
  @Column('uuid') imageId!: string;
  @ManyToOne(() => Image, (i) => i.attributes, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'image_id' }) image?: Image;
  @Column('text') category!: string;
  @Column('text') name!: string;
  @Column('text') value!: string;
}
