import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, TimestampColumn } from '@ws/database';
import type { Permission } from '@ws/auth';

export type SystemGroup = 'all_users' | 'administrators';
export type UsageInterval = 'daily' | 'weekly' | 'monthly' | 'total';

@Entity('groups')
export class Group {
  @PrimaryColumn('uuid') id!: string;
  @Index({ unique: true }) @Column('text') name!: string;
  @Column('text', { nullable: true }) description!: string | null;
  /** Set for the built-in groups All Users and Administrators. */
  @Index({ unique: true }) @Column('text', { nullable: true }) systemKey!: SystemGroup | null;
  /** What members of the group may do (Administrators: Global Admin). */
  @Column('text', { array: true, default: () => "'{}'" }) permissions!: Permission[];
  /** Lower number wins when a user's groups disagree on a setting. */
  @Column('integer', { default: 100 }) priority!: number;
  /** Seconds a keepalive extends a workspace by; null: the deployment default. */
  @Column('integer', { nullable: true }) keepaliveExpiration!: number | null;
  /** Seconds of workspace use allowed per user within usage_interval; null: unlimited. */
  @Column('integer', { nullable: true }) usageLimit!: number | null;
  /** The window usage_limit counts over: the current UTC day, week (from Monday), month, or all time. */
  @Column('text', { default: 'total' }) usageInterval!: UsageInterval;
  @Column('uuid', { nullable: true }) defaultImageId!: string | null;
  /** Whether the stream gateway records members' sessions (record_sessions); null: not set by this group. */
  @Column('boolean', { nullable: true }) recordSessions!: boolean | null;
  /** Overrides of the spec's client_settings keys. */
  @Column('jsonb', { default: () => "'{}'" }) clientSettings!: Record<string, boolean | number>;
  @CreatedAt() createdAt!: Date;
}

@Entity('user_groups')
export class UserGroup {
  @PrimaryColumn('uuid') userId!: string;
  @PrimaryColumn('uuid') groupId!: string;
  // The users library sits beside this one and uses it: the foreign key names its entity, not its class.
  @ManyToOne('User', { onDelete: 'CASCADE' }) @JoinColumn({ name: 'user_id' }) user?: unknown;
  @ManyToOne(() => Group, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'group_id' }) group?: Group;
  @TimestampColumn({ default: () => 'now()' }) addedAt!: Date;
}
