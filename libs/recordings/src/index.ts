export * from './capture-format';
export * from './session-recording.entity';
export * from './recordings.module';
