// What other libraries and the apps use of @ws/casting; everything else is internal to it.
export { CastConfig } from './cast-config.entity';
export { toCastConfigResponse } from './cast-config.mappers';
export { CastLaunch, castRefused } from './cast-launch.service';
export { CastingModule } from './casting.module';
export { CastingService } from './casting.service';
export { CastConfigRef, CastLaunchRequest, CreateCastConfigRequest, UpdateCastConfigRequest } from './dto/cast-config.requests';
