import { hostname } from 'node:os';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { Job, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import { AppConfig } from '@ws/common';
import { withLogBindings } from '@ws/logging';
import { Metrics } from '@ws/metrics';
import { JOB_HANDLER_KEY } from './job-handler.decorator';
import { JobProducer } from './job-producer';
import { JOB_QUEUE, jobOptions, JobName, JobPayloads, JOBS, MAX_JOB_STALLS, QueueName, QUEUES, SCHEDULED_JOBS } from './jobs';
import { PermanentFailure } from './permanent-failure';
import { RedisConnections } from './redis-connections';

/** `signal` aborts when the job is handed back at shutdown: the handler should stop and must not record a failure. */
type Handler = (payload: JobPayloads[JobName], job: Job, signal: AbortSignal) => Promise<unknown>;

/** A job this process is running, with what handing it back needs. */
interface RunningJob {
  job: Job;
  token: string | undefined;
  abort: AbortController;
}

/** After the grace: how long handing one job back, and then closing the workers, may take. */
const HAND_BACK_TIMEOUT_MS = 2000;
const CLOSE_AFTER_HAND_BACK_MS = 3000;

/**
 * Runs every @JobHandler of the application on BullMQ. Refuses to boot when a job of JobPayloads has
 * no handler, or two: a job that nobody runs would wait forever.
 */
@Injectable()
export class QueueWorkers implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(QueueWorkers.name);
  private readonly workers: Worker[] = [];
  private readonly handlers = new Map<JobName, Handler>();
  /** Keyed by queue and job id (job ids are unique per queue). */
  private readonly running = new Map<string, RunningJob>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly config: AppConfig,
    private readonly redis: RedisConnections,
    private readonly producer: JobProducer,
    private readonly metrics: Metrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.collectHandlers();
    const missing = (Object.keys(JOB_QUEUE) as JobName[]).filter((name) => !this.handlers.has(name));
    if (missing.length) throw new Error(`No handler for jobs: ${missing.join(', ')}`);
    for (const queue of Object.values(QUEUES)) this.workers.push(this.startWorker(queue));
    // Repeat schedules of the JOBS table, upserted idempotently at every boot (one schedule per job id).
    for (const job of SCHEDULED_JOBS) {
      const { everyMs, everyMsSetting } = JOBS[job];
      const every = everyMsSetting ? this.config[everyMsSetting] : everyMs;
      await this.producer.queue(JOB_QUEUE[job]).upsertJobScheduler(job, { every }, { name: job, data: {}, opts: jobOptions(job) });
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
    const lockMs = this.config.WORKER_LOCK_MS;
    const worker = new Worker(
      queue,
      async (job: Job, token?: string) => {
        const handler = this.handlers.get(job.name as JobName);
        if (!handler) throw new Error(`No handler for job ${job.name}`);
        const key = `${queue}:${job.id}`;
        const abort = new AbortController();
        this.running.set(key, { job, token, abort });
        const started = performance.now();
        let outcome = 'completed';
        try {
          // Every line the handler logs carries the job's id, name and queue and the ids of its payload.
          const run = withLogBindings(jobLogBindings(queue, job), () => handler(job.data as JobPayloads[JobName], job, abort.signal));
          run.catch(() => undefined); // still settles after a hand-back, when nobody awaits it any more
          return await Promise.race([run, rejectWhenAborted(abort.signal)]);
        } catch (err) {
          // Handed back at shutdown: the job is in the wait list again; BullMQ must neither fail nor retry it here.
          if (abort.signal.aborted) {
            outcome = 'handed_back';
            throw new WaitingError();
          }
          const permanent = err instanceof PermanentFailure || err instanceof UnrecoverableError;
          outcome = permanent || job.attemptsMade + 1 >= (job.opts.attempts ?? 1) ? 'failed' : 'retried';
          throw err instanceof PermanentFailure ? new UnrecoverableError(err.message) : err;
        } finally {
          this.running.delete(key);
          this.metrics.jobs.inc({ queue, job: job.name, outcome });
          this.metrics.jobDuration.observe({ queue, job: job.name }, (performance.now() - started) / 1000);
        }
      },
      {
        connection: this.redis.dedicatedClient(), prefix: this.config.REDIS_PREFIX, concurrency: queue === QUEUES.recordings ? this.config.RECORDING_CONVERT_CONCURRENCY : this.config.WORKER_CONCURRENCY,
        // Recorded on each job it takes (job.processedBy): which process runs what.
        name: `${hostname()}:${process.pid}`,
        // The lock is renewed at half its duration while this process lives, so a long job (a desktop that takes
        // a minute to answer) keeps it. When the process dies the lock lapses and the next stall check (any
        // worker's, paced by a key they share) hands the job to another worker: within lock + stalledInterval.
        lockDuration: lockMs, lockRenewTime: lockMs / 2, stalledInterval: Math.max(500, Math.round(lockMs / 2)),
        // Handlers see job.stalledCounter and give up cleanly past MAX_JOB_STALLS (a job that kills its worker
        // every time). BullMQ's own limit, which fails the job without running its handler, stays beyond that.
        maxStalledCount: MAX_JOB_STALLS + 2,
      },
    );
    worker.on('failed', (job, err) => this.logger.warn(`${job?.name} ${job?.id} failed (attempt ${job?.attemptsMade}): ${err.message}`));
    worker.on('stalled', (jobId) => this.logger.warn(`queue ${queue}: job ${jobId} lost its worker; handed to another`));
    worker.on('error', (err) => this.logger.error(`queue ${queue}: ${err.message}`));
    return worker;
  }

  /**
   * Bounded shutdown, before the Redis connections close (they close on application shutdown; a worker
   * closed after its connection retries its running job without pause). Running jobs get
   * WORKER_SHUTDOWN_GRACE_MS to finish; the rest are handed back to the wait list, where another worker
   * takes them at once instead of after a lock timeout, and their handlers are aborted.
   */
  async onModuleDestroy(): Promise<void> {
    const closed = Promise.all(this.workers.map((w) => w.close()));
    if (await settlesWithin(closed, this.config.WORKER_SHUTDOWN_GRACE_MS)) return;
    const running = [...this.running.values()];
    const handedBack = await Promise.all(running.map((r) => this.handBack(r)));
    // Named, so an operator can tell a job that was slow to finish from one that waits on something.
    const names = running.map(({ job }) => `${job.name} ${job.id}`).join(', ');
    this.logger.warn(
      `shutdown: ${handedBack.filter(Boolean).length} of ${running.length} running jobs handed back to the queue after the ${this.config.WORKER_SHUTDOWN_GRACE_MS} ms grace (${names})`,
    );
    if (!(await settlesWithin(closed, CLOSE_AFTER_HAND_BACK_MS))) this.logger.warn('shutdown: queue workers did not close; leaving them');
  }

  /** Moves a running job back to the wait list (only while this worker still holds its lock) and aborts its handler. */
  private async handBack({ job, token, abort }: RunningJob): Promise<boolean> {
    let moved = false;
    try {
      await settlesWithin(job.moveToWait(token).then(() => (moved = true)), HAND_BACK_TIMEOUT_MS);
    } catch (err) {
      // Lock already lost (another worker has it) or Redis gone: the stall check hands it over instead.
      this.logger.warn(`shutdown: could not hand back ${job.name} ${job.id}: ${(err as Error).message}`);
    }
    abort.abort(new Error('worker shutting down'));
    return moved;
  }
}

/** The job's id, name and queue, and each `…Id` of its payload as `…_id` (workspace_id, recording_id, …). */
export function jobLogBindings(queue: string, job: Pick<Job, 'id' | 'name' | 'data'>): Record<string, unknown> {
  const bindings: Record<string, unknown> = { job_id: job.id, job: job.name, queue };
  for (const [key, value] of Object.entries((job.data ?? {}) as Record<string, unknown>)) {
    if (/Id$/.test(key) && typeof value === 'string') bindings[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
  }
  return bindings;
}

/** True when `promise` settled within `ms` (a rejection propagates). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function rejectWhenAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
}
