export * from './jobs';
export * from './job-producer';
export * from './job-handler.decorator';
export * from './queue-workers';
export * from './redis-connections';
export * from './queue.module';
export * from './permanent-failure';
