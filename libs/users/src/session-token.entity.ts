import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { CreatedAt, TimestampColumn } from '@ws/database';
import { User } from './user.entity';

/**
 * A user's login session. Its JWT names this row; a JWT is honoured only while the row exists, is not
 * expired, and (for workspace links) has not been superseded. Deleting the row revokes every JWT of it.
 */
@Entity('session_tokens')
export class SessionToken {
  @PrimaryColumn('uuid') id!: string;
  @Index() @Column('uuid') userId!: string;
  @ManyToOne(() => User, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'user_id' }) user?: User;
  /** Creation or last promotion. */
  @TimestampColumn() tokenDate!: Date;
  @Index() @TimestampColumn() expiresAt!: Date;
  /** Incremented on each promotion or renewal; a JWT carries the generation it was signed for. */
  @Column('integer', { default: 0 }) generation!: number;
  @CreatedAt() createdAt!: Date;
}
