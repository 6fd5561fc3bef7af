export * from './capture-rows';
export * from './capture-rows.module';
export * from './session-recorder';
export * from './segment-uploader';
export * from './spool';
export * from './recording-capture.service';
export * from './capture.module';
