import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { BigIntColumn, CreatedAt, TimestampColumn, UpdatedAt } from '@ws/database';
import { Workspace } from '@ws/workspaces';

/**
 * recording: the gateway is capturing (segments are being uploaded);
 * captured: every segment is stored, conversion is due (job recording.convert);
 * ready: the video and thumbnail are stored and verified, the raw capture is deleted;
 * failed: conversion gave up (error says why; the raw capture is kept for an operator).
 */
export type RecordingStatus = 'recording' | 'captured' | 'ready' | 'failed';

/** One recorded stream connection of a workspace (spec: Session recording). */
@Entity('session_recordings')
@Index(['status', 'updatedAt'])
export class SessionRecording {
  @PrimaryColumn('uuid') id!: string;
  @Index() @Column('uuid') workspaceId!: string;
  @ManyToOne(() => Workspace, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'workspace_id' }) workspace?: Workspace;
  /** The account the session belonged to (the workspace's owner when recording started); account_id on the wire. */
  @Column('uuid', { nullable: true }) userId!: string | null;
  /** The gateway connection recorded (RfbSession id). */
  @Column('text') clientId!: string;
  @Column('text') status!: RecordingStatus;
  /** STORAGE_URL when the recording started: a later change of the setting does not lose older recordings. */
  @Column('text') storageUrl!: string;
  /** Key prefix of the raw capture segments (capture-format.ts segmentKey). */
  @Column('text') capturePrefix!: string;
  /** Segments stored so far (all of them once status is past `recording`). */
  @Column('integer', { default: 0 }) segmentCount!: number;
  @BigIntColumn({ default: 0 }) captureBytes!: number;
  @TimestampColumn() startedAt!: Date;
  @TimestampColumn({ nullable: true }) endedAt!: Date | null;
  /** The converted video's key in the store, once ready. */
  @Column('text', { nullable: true }) videoKey!: string | null;
  @BigIntColumn({ nullable: true }) videoBytes!: number | null;
  @Column('text', { nullable: true }) videoContentType!: string | null;
  /** Whole seconds of video. */
  @Column('integer', { nullable: true }) durationSeconds!: number | null;
  /** A small JPEG of the session as a data: url (session_recording_metadata.thumbnail). */
  @Column('text', { nullable: true }) thumbnail!: string | null;
  @Column('text', { nullable: true }) error!: string | null;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}
