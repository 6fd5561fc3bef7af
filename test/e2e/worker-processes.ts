import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { AppConfig } from '@ws/common';
import { jobId, QueueName, QUEUES } from '@ws/queue';
import { appendSuiteLog, waitFor } from './harness';

const ROOT = resolve(__dirname, '../..');
/** Compiled worker entry point: `npm test` builds dist/ first; WS_TEST_WORKER_JS points elsewhere while developing. */
export const WORKER_JS = resolve(ROOT, process.env.WS_TEST_WORKER_JS ?? 'dist/apps/worker/src/main.js');

/** A worker as a real child process (node on the compiled worker), so it can be SIGKILLed like a crashed one. */
export class WorkerProcess {
  private output = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitCode: number | null | undefined = undefined;

  private constructor(readonly child: ChildProcess) {
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on('data', (chunk: Buffer) => {
        this.output += chunk.toString();
        appendSuiteLog(chunk);
      });
    }
    this.exited = new Promise((done) => child.once('exit', (code, signal) => {
      this.exitCode = code;
      done({ code, signal });
    }));
  }

  /**
   * Same settings as the test's api (database, Redis prefix, deployment), as strings in the environment. `entry`:
   * the compiled worker (a bench, itself compiled under dist/, passes its own).
   */
  static spawn(settings: Record<string, unknown>, extra: Record<string, string> = {}, entry = WORKER_JS): WorkerProcess {
    const env: Record<string, string> = { ...(process.env as Record<string, string>), NODE_PATH: resolve(ROOT, 'node_modules') };
    for (const [name, value] of Object.entries(settings)) if (value !== undefined && value !== null) env[name] = String(value);
    Object.assign(env, { LOG_LEVEL: 'log' }, extra);
    return new WorkerProcess(spawn(process.execPath, [entry], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get alive(): boolean {
    return this.exitCode === undefined;
  }

  log(): string {
    return this.output;
  }

  ready(timeoutMs = 60_000): Promise<true> {
    return waitFor(`worker ${this.pid} started`, async () => {
      if (!this.alive) throw new Error(`worker ${this.pid} exited while starting:\n${this.output}`);
      return this.output.includes('workspace-server worker started') ? true : undefined;
    }, timeoutMs, 50);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL', timeoutMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.alive) this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`worker ${this.pid} did not exit within ${timeoutMs} ms of ${signal}`)), timeoutMs)));
    try {
      return await Promise.race([this.exited, bound]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Reads the deployment's queues in Redis (its prefix), as BullMQ stores them. */
class QueueReader {
  private readonly connection: Redis;
  protected readonly queues: Record<QueueName, Queue>;

  constructor(config: AppConfig) {
    this.connection = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null });
    const queue = (name: QueueName) => new Queue(name, { connection: this.connection, prefix: config.REDIS_PREFIX });
    this.queues = { workspaces: queue(QUEUES.workspaces), maintenance: queue(QUEUES.maintenance), recordings: queue(QUEUES.recordings) };
  }

  async close(): Promise<void> {
    for (const queue of Object.values(this.queues)) await queue.close();
    await this.connection.quit();
  }
}

/** Reads which worker process holds a workspace's provision job (BullMQ records the worker's name, host:pid). */
export class ProvisionJobs extends QueueReader {
  async job(workspaceId: string) {
    return this.queues.workspaces.getJob(jobId.provision(workspaceId));
  }

  /** Pid of the worker process running the provision, when it is active. */
  async holderPid(workspaceId: string): Promise<number | null> {
    const job = await this.job(workspaceId);
    if (!job || (await job.getState()) !== 'active' || !job.processedBy) return null;
    return pidOf(job.processedBy);
  }

  /** Ids of the workspaces whose provision a worker process is running right now. */
  async activeOn(pid: number): Promise<string[]> {
    const active = await this.queues.workspaces.getJobs(['active']);
    return active.filter((job) => job.name === 'workspace.provision' && job.processedBy && pidOf(job.processedBy) === pid).map((job) => (job.data as { workspaceId: string }).workspaceId);
  }
}

/** A job scheduler as BullMQ keeps it (one hash and one entry of the queue's repeat set per scheduler id). */
export interface Schedule {
  queue: QueueName;
  id: string;
  name: string;
  every: number | undefined;
}

/** One run of a scheduled job: the slot it was scheduled for (its id's last part), when it started and on which worker. */
export interface ScheduledRun {
  slot: number;
  processedOn: number;
  worker: string;
}

/** Reads the repeat schedules of every queue and the runs they made. */
export class JobSchedules extends QueueReader {
  async list(): Promise<Schedule[]> {
    const all = await Promise.all((Object.keys(this.queues) as QueueName[]).map(async (queue) =>
      (await this.queues[queue].getJobSchedulers()).map((s) => ({ queue, id: s.key, name: s.name, every: s.every }))));
    return all.flat();
  }

  /** The runs of scheduler `id` on `queue` that started (finished, failed or still running), in slot order. */
  async runs(queue: QueueName, id: string): Promise<ScheduledRun[]> {
    const prefix = `repeat:${id}:`;
    const jobs = await this.queues[queue].getJobs(['completed', 'failed', 'active']);
    return jobs
      .filter((job) => job.id?.startsWith(prefix) && job.processedOn)
      .map((job) => ({ slot: Number(job.id?.slice(prefix.length)), processedOn: job.processedOn as number, worker: job.processedBy ?? '' }))
      .sort((a, b) => a.slot - b.slot);
  }
}

function pidOf(processedBy: string): number | null {
  const pid = Number(processedBy.split(':').pop());
  return Number.isInteger(pid) ? pid : null;
}
