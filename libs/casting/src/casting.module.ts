import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { UsersModule } from '@ws/users';
import { WorkspacesModule } from '@ws/workspaces';
import { CastConfig } from './cast-config.entity';
import { CastLaunch } from './cast-launch.service';
import { CastingService } from './casting.service';

/** Casting configs (public launch links) and their launch through the workspace launch pipeline. */
@Module({
  imports: [TypeOrmModule.forFeature([CastConfig]), UsersModule, WorkspacesModule],
  providers: [CastingService, CastLaunch],
  exports: [CastingService, CastLaunch],
})
export class CastingModule {}
