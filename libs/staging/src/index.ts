// What other libraries and the apps use of @ws/staging; everything else is internal to it.
export { CreateStagingConfigRequest, StagingConfigRequest, UpdateStagingConfigRequest } from './dto/staging.requests';
export { StagingConfig } from './staging-config.entity';
export { StagingReconciler } from './staging-reconciler.service';
export { stagingPools } from './staging-figures';
export { toStagingConfigResponse } from './staging.mappers';
export { StagingModule } from './staging.module';
export { StagingService } from './staging.service';
