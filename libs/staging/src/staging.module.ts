import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { WorkspacesModule } from '@ws/workspaces/workspaces.module';
import { StagingConfig } from './staging-config.entity';
import { StagingReconciler } from './staging-reconciler.service';
import { StagingService } from './staging.service';

/** Staging configs, the claim step of request_workspace (registered on load) and the pool reconciler (worker). */
@Module({
  imports: [TypeOrmModule.forFeature([StagingConfig]), WorkspacesModule],
  providers: [StagingService, StagingReconciler],
  exports: [StagingService, StagingReconciler],
})
export class StagingModule {}
