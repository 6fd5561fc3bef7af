import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { CreatedAt } from '@ws/database';

@Entity('zones')
export class Zone {
  @PrimaryColumn('uuid') id!: string;
  @Index({ unique: true }) @Column('text') name!: string;
  @Column('boolean', { default: false }) autoScalingEnabled!: boolean;
  @Column('boolean', { default: false }) cloudEnabled!: boolean;
  @Column('text', { default: '' }) cloudRegion!: string;
  @Column('text', { default: '' }) cloudAccessKeyId!: string;
  @Column('text', { default: '' }) cloudSecretAccessKey!: string;
  @Column('text', { default: '' }) cloudAgentImageId!: string;
  @CreatedAt() createdAt!: Date;
}
