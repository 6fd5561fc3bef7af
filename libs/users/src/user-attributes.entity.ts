import { Column, Entity, Index, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { User } from './user.entity';

@Entity('user_attributes')
export class UserAttributes {
  @PrimaryColumn('uuid') id!: string;
  @Index({ unique: true }) @Column('uuid') userId!: string;
  @OneToOne(() => User, { onDelete: 'CASCADE' }) @JoinColumn({ name: 'user_id' }) user?: User;
  @Column('text', { nullable: true }) sshPublicKey!: string | null;
  @Column('boolean', { default: true }) showTips!: boolean;
  @Column('boolean', { default: true }) toggleControlPanel!: boolean;
  @Column('boolean', { default: true }) chatSfx!: boolean;
  /** An image id; not a foreign key so an image can be removed without touching users. */
  @Column('uuid', { nullable: true }) defaultImageId!: string | null;
  @Column('boolean', { nullable: true }) autoLoginWorkspace!: boolean | null;
}
