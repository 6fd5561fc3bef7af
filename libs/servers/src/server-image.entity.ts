import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { TimestampColumn } from '@ws/database';
import { Server } from './server.entity';

/**
 * The image inventory (issue 24, point 4): one row per image reference (each repo:tag, and the image id) a server's
 * engine held at its last inventory. Placement does not choose a server whose inventory lacks a launch's image.
 */
@Entity('server_images')
export class ServerImage {
  @PrimaryColumn('uuid') serverId!: string;
  @ManyToOne(() => Server, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'server_id' }) server?: Server;
  /** `repo:tag` as Docker lists it, or the image id (`sha256:…`). */
  @PrimaryColumn('text') reference!: string;
  @Column('text') imageId!: string;
  @TimestampColumn() seenAt!: Date;
}
