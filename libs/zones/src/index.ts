export * from './zone.entity';
export * from './zones.service';
export * from './zones.module';
