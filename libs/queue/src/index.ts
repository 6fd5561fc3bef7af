// What other libraries and the apps use of @ws/queue; everything else is internal to it.
export { JobHandler } from './job-handler.decorator';
export { JobProducer } from './job-producer';
export { JOB_QUEUE, MAX_JOB_STALLS, QUEUES, jobId } from './jobs';
export type { DestroyReason, JobPayloads } from './jobs';
export { PermanentFailure } from './permanent-failure';
export { QueueWorkers } from './queue-workers';
export { queueDepths } from './queue-depths';
export { QueueModule } from './queue.module';
export { RedisConnections } from './redis-connections';
