import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { JobsOptions, Queue } from 'bullmq';
import { AppConfig } from '@ws/common';
import { JOB_QUEUE, JobName, jobOptions, JobPayloads, QueueName } from './jobs';
import { RedisConnections } from './redis-connections';

/** The one way to enqueue work: typed by JobPayloads, retried as the JOBS table of jobs.ts says. */
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
      const created = new Queue(name, { connection: this.redis.shared(), prefix: this.config.REDIS_PREFIX });
      // Connection errors are reported by health; a queue whose first check failed (Redis stalled) stays
      // broken in BullMQ, so the next call builds a new one.
      created.on('error', () => undefined);
      created.waitUntilReady().catch(() => this.queues.get(name) === created && this.queues.delete(name));
      this.queues.set(name, created);
      queue = created;
    }
    return queue;
  }

  async enqueue<J extends JobName>(name: J, payload: JobPayloads[J], options: JobsOptions = {}): Promise<void> {
    this.redis.assertConnected();
    await this.queue(JOB_QUEUE[name]).add(name, payload, { ...jobOptions(name), ...options });
  }

  /**
   * Makes sure a job with this id will run: adds it, or retries it when an earlier run failed for good, or
   * replaces a finished one (a completed job keeps its id for a while and would swallow a plain add).
   */
  async ensure<J extends JobName>(name: J, payload: JobPayloads[J], id: string): Promise<void> {
    this.redis.assertConnected();
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
