import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { PersistentProfile } from './persistent-profile.entity';
import { ProfileSync } from './profile-sync.service';

@Module({
  imports: [TypeOrmModule.forFeature([PersistentProfile])],
  providers: [ProfileSync],
  exports: [ProfileSync],
})
export class ProfilesModule {}
