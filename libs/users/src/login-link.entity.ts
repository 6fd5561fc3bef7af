import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, TimestampColumn } from '@ws/database';
import { User } from './user.entity';

/** A one-time, short-lived login url made by `get_login`. Only the SHA-256 of its secret is kept. */
@Entity('login_links')
export class LoginLink {
  @PrimaryColumn('uuid') id!: string;
  @Index() @Column('uuid') userId!: string;
  @ManyToOne(() => User, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'user_id' }) user?: User;
  @Index({ unique: true }) @Column('text') secretSha256!: string;
  @TimestampColumn() expiresAt!: Date;
  @TimestampColumn({ nullable: true }) usedAt!: Date | null;
  @CreatedAt() createdAt!: Date;
}
