export * from './capture-format';
export * from './session-recording.entity';
export * from './recordings.module';
export * from './recording-stores';
export * from './recording.mappers';
export * from './recordings.service';
export * from './recording-retention.service';
export * from './dto/recording.requests';
