import { Column, Entity, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, UpdatedAt } from '@ws/database';
import { Image } from './image.entity';
import type { OverridableField, RdpClientOption, ServerProtocol } from './server-target';

/** What a server image (images.kind 'server') reaches instead of starting a container; one row per such image. */
@Entity('server_targets')
export class ServerTargetRecord {
  @PrimaryColumn('uuid') imageId!: string;
  @OneToOne(() => Image, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'image_id' }) image?: Image;
  @Column('text') protocol!: ServerProtocol;
  @Column('text') host!: string;
  @Column('integer') port!: number;
  /** May contain `{username}`, replaced by the requesting user's name. */
  @Column('text', { default: '' }) usernameTemplate!: string;
  @Column('text', { default: '' }) domain!: string;
  /** AES-256-GCM under SERVER_CREDENTIALS_KEY (ServerCredentialCipher), bound to the image id; never returned. */
  @Column('text', { nullable: true }) passwordEncrypted!: string | null;
  /** connection_info fields a request may override. */
  @Column('text', { array: true, default: () => "'{}'" }) allowOverride!: OverridableField[];
  @Column('text', { default: 'guac' }) rdpClient!: RdpClientOption;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}
