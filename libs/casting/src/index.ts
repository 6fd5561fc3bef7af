export * from './cast-config.entity';
export * from './cast-config.mappers';
export * from './casting.service';
export * from './casting.module';
export * from './dto/cast-config.requests';
export * from './cast-launch.service';
