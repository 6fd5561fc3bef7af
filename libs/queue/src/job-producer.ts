import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { JobsOptions, Queue } from 'bullmq';
import { AppConfig } from '@ws/common';
import { JOB_QUEUE, JobName, JobPayloads, QueueName } from './jobs';
import { RedisConnections } from './redis-connections';

const DEFAULTS: JobsOptions = {
  attempts: 8,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

/** The one way to enqueue work: typed by JobPayloads. */
@Injectable()
export class JobProducer implements OnModuleDestroy {
  private readonly queues = new Map<QueueName, Queue>();

  constructor(
    private readonly config: AppConfig,
    private readonly redis: RedisConnections,
  ) {}

  queue(name: QueueName): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.redis.shared(), prefix: this.config.REDIS_PREFIX });
      this.queues.set(name, queue);
    }
    return queue;
  }

  async enqueue<J extends JobName>(name: J, payload: JobPayloads[J], options: JobsOptions = {}): Promise<void> {
    await this.queue(JOB_QUEUE[name]).add(name, payload, { ...DEFAULTS, ...options });
  }

  /**
   * Makes sure a job with this id will run: adds it, or retries it when an earlier run failed for good, or
   * replaces a finished one (a completed job keeps its id for a while and would swallow a plain add).
   */
  async ensure<J extends JobName>(name: J, payload: JobPayloads[J], id: string): Promise<void> {
    const queue = this.queue(JOB_QUEUE[name]);
    const existing = await queue.getJob(id);
    if (existing) {
      const state = await existing.getState();
      if (state === 'failed') return existing.retry();
      if (state !== 'completed') return;
      await existing.remove().catch(() => undefined);
    }
    await this.enqueue(name, payload, { jobId: id });
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
