import { SetMetadata } from '@nestjs/common';
import type { JobName } from './jobs';

export const JOB_HANDLER_KEY = 'ws:job-handler';

/** Marks a processor method as the handler of one job; QueueWorkers finds it at boot. */
export const JobHandler = (name: JobName) => SetMetadata(JOB_HANDLER_KEY, name);
