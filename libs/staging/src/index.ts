export * from './staging-config.entity';
export * from './staging.mappers';
export * from './staging.service';
export * from './staging-reconciler.service';
export * from './staging-replenisher';
export * from './staging-queries';
export * from './staging.module';
export * from './dto/staging.requests';
