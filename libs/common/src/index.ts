export * from './config';
export * from './config.module';
export * from './errors';
export * from './dependency-errors';
export * from './ids';
export * from './timestamps';
export * from './redact';
export * from './validation';
