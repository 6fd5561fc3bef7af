export * from './capture-rows';
export * from './capture-rows.module';
export * from './session-recorder';
export * from './spool';
export * from './recording-capture.service';
export * from './capture.module';
