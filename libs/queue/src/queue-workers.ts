import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { Job, UnrecoverableError, Worker } from 'bullmq';
import { AppConfig } from '@ws/common';
import { JOB_HANDLER_KEY } from './job-handler.decorator';
import { JobProducer } from './job-producer';
import { JOB_QUEUE, JobName, JobPayloads, QueueName, QUEUES } from './jobs';
import { PermanentFailure } from './permanent-failure';
import { RedisConnections } from './redis-connections';

type Handler = (payload: JobPayloads[JobName], job: Job) => Promise<unknown>;

/** Repeating maintenance, scheduled idempotently at every boot (one schedule per id, whatever the replica count). */
const SCHEDULES: Array<{ job: JobName; everyMs: number }> = [
  { job: 'maintenance.purge-expired-credentials', everyMs: 5 * 60_000 },
  { job: 'maintenance.reap-expired-workspaces', everyMs: 30_000 },
  { job: 'maintenance.reconcile-containers', everyMs: 60_000 },
];

/**
 * Runs every @JobHandler of the application on BullMQ. Refuses to boot when a job of JobPayloads has
 * no handler, or two: a job that nobody runs would wait forever.
 */
@Injectable()
export class QueueWorkers implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(QueueWorkers.name);
  private readonly workers: Worker[] = [];
  private readonly handlers = new Map<JobName, Handler>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly config: AppConfig,
    private readonly redis: RedisConnections,
    private readonly producer: JobProducer,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.collectHandlers();
    const missing = (Object.keys(JOB_QUEUE) as JobName[]).filter((name) => !this.handlers.has(name));
    if (missing.length) throw new Error(`No handler for jobs: ${missing.join(', ')}`);
    for (const queue of Object.values(QUEUES)) this.workers.push(this.startWorker(queue));
    for (const { job, everyMs } of SCHEDULES) {
      await this.producer.queue(JOB_QUEUE[job]).upsertJobScheduler(job, { every: everyMs }, { name: job, data: {} });
    }
    this.logger.log(`running ${this.handlers.size} job handlers on queues ${Object.values(QUEUES).join(', ')}`);
  }

  private collectHandlers(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const name = this.reflector.get<JobName | undefined>(JOB_HANDLER_KEY, (instance[method] as () => unknown) ?? {});
        if (!name) continue;
        if (this.handlers.has(name)) throw new Error(`Two handlers for job ${name}`);
        this.handlers.set(name, (instance[method] as Handler).bind(instance));
      }
    }
  }

  private startWorker(queue: QueueName): Worker {
    const worker = new Worker(
      queue,
      async (job: Job) => {
        const handler = this.handlers.get(job.name as JobName);
        if (!handler) throw new Error(`No handler for job ${job.name}`);
        try {
          return await handler(job.data as JobPayloads[JobName], job);
        } catch (err) {
          throw err instanceof PermanentFailure ? new UnrecoverableError(err.message) : err;
        }
      },
      {
        connection: this.redis.dedicatedClient(), prefix: this.config.REDIS_PREFIX, concurrency: this.config.WORKER_CONCURRENCY,
        // A worker that dies mid-job loses its lock; another picks the job up after this long.
        lockDuration: this.config.WORKER_LOCK_MS, stalledInterval: this.config.WORKER_LOCK_MS,
      },
    );
    worker.on('failed', (job, err) => this.logger.warn(`${job?.name} ${job?.id} failed (attempt ${job?.attemptsMade}): ${err.message}`));
    worker.on('error', (err) => this.logger.error(`queue ${queue}: ${err.message}`));
    return worker;
  }

  /** Before the Redis connections close (they close on application shutdown): a worker closed after its
   * connection retries its running job without pause. */
  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.close()));
  }
}
