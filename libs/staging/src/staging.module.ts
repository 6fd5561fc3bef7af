import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { WorkspacesModule } from '@ws/workspaces';
import { ClaimStagedStep } from './claim-staged.step';
import { StagingConfig } from './staging-config.entity';
import { StagingReconciler } from './staging-reconciler.service';
import { StagingReplenisher } from './staging-replenisher';
import { StagingService } from './staging.service';

/**
 * Staging configs, the claim step of every launch (ClaimStagedStep), and on the worker the pool
 * reconciler and the outbox subscriber that refills a pool (the relay collects it there; the api has no relay).
 */
@Module({
  imports: [TypeOrmModule.forFeature([StagingConfig]), WorkspacesModule],
  providers: [StagingService, ClaimStagedStep, StagingReconciler, StagingReplenisher],
  exports: [StagingService, StagingReconciler, StagingReplenisher],
})
export class StagingModule {}
