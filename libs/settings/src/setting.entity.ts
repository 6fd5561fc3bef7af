import { Column, Entity, PrimaryColumn } from 'typeorm';
import { UpdatedAt } from '@ws/database';

/** Global settings of the deployment (Session Lifetime, Same Site Cookie Policy, signing keys …). */
@Entity('settings')
export class Setting {
  @PrimaryColumn('text') key!: string;
  @Column('jsonb') value!: unknown;
  @UpdatedAt() updatedAt!: Date;
}
