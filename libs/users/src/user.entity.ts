import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { CreatedAt, TimestampColumn, UpdatedAt } from '@ws/database';

@Entity('users')
/** get_users' page order (@ws/database listPage, creationOrder). */
@Index('ix_users_creation_order', ['createdAt', 'id'])
export class User {
  @PrimaryColumn('uuid') id!: string;
  @Index({ unique: true }) @Column('text') username!: string;
  @Column('text', { nullable: true }) firstName!: string | null;
  @Column('text', { nullable: true }) lastName!: string | null;
  @Column('text', { nullable: true }) phone!: string | null;
  @Column('text', { nullable: true }) organization!: string | null;
  @Column('text', { nullable: true }) notes!: string | null;
  @Column('boolean', { default: false }) locked!: boolean;
  @Column('boolean', { default: false }) disabled!: boolean;
  @Column('text', { default: 'local' }) realm!: string;
  /** bcrypt; null for users who cannot log in with a password (anonymous, login-link only). */
  @Column('text', { nullable: true }) passwordHash!: string | null;
  @Column('boolean', { default: false }) anonymous!: boolean;
  /**
   * An anonymous user made by join_workspace: the workspace it was made to view. It owns none, so it is removed
   * when that workspace is (AnonymousUsers). No foreign key: workspace rows stay as history.
   */
  @Index() @Column('uuid', { nullable: true }) joinedWorkspaceId!: string | null;
  @Column('boolean', { default: false }) twoFactor!: boolean;
  @Column('text', { nullable: true }) programId!: string | null;
  @TimestampColumn({ nullable: true }) lastSession!: Date | null;
  /** Bumped whenever credentials change; part of the user's `hash`. */
  @TimestampColumn({ default: () => 'now()' }) credentialsChangedAt!: Date;
  @CreatedAt() createdAt!: Date;
  @UpdatedAt() updatedAt!: Date;
}
