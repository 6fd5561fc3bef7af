// What other libraries and the apps use of @ws/queue; everything else is internal to it.
export { JobHandler } from './job-handler.decorator';
export { JobProducer } from './job-producer';
export { JOB_QUEUE, JOBS, MAX_JOB_STALLS, QUEUES, SCHEDULED_JOBS, jobId } from './jobs';
export type { DestroyReason, JobName, JobPayloads, QueueName } from './jobs';
export { PermanentFailure } from './permanent-failure';
export { QueueWorkers } from './queue-workers';
export { queueDepths } from './queue-depths';
export { QueueModule } from './queue.module';
export { RedisConnections } from './redis-connections';
