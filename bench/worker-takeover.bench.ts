/**
 * Issue 8 benchmark: a worker SIGKILLed in the middle of a provision (container created, desktop not yet
 * answering). Time from the kill until a polling integrator sees `running` (another worker took the job over and
 * finished it), beside the same provision without a kill (request → running), interleaved in one run.
 * Workers are real processes on the compiled worker, with the product's default lock.
 */
import 'reflect-metadata';
import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { loadConfig } from '@ws/common';
import { jobId, QUEUES } from '@ws/queue';
import { benchEnv, desktopImage, post, registerLocalDesktop, startBenchApi, until } from './harness';
import { median, percentile, row } from './stats';

const ROUNDS = Number(process.env.BENCH_TAKEOVER_ROUNDS ?? 8);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
/** The compiled worker (npm run bench builds dist/ and runs this file from dist/bench). */
const WORKER_JS = process.env.BENCH_WORKER_JS ?? resolve(__dirname, '../apps/worker/src/main.js');

class WorkerProcess {
  output = '';
  exited = false;
  readonly child: ChildProcess;

  constructor(env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, [WORKER_JS], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.child.stderr?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.child.once('exit', () => (this.exited = true));
  }

  ready(): Promise<true> {
    return until('worker started', async () => {
      if (this.exited) throw new Error(`worker exited while starting:\n${this.output}`);
      return this.output.includes('workspace-server worker started') ? true : undefined;
    });
  }

  async kill(): Promise<void> {
    if (!this.exited) this.child.kill('SIGKILL');
    await until('worker exited', async () => (this.exited ? true : undefined), 30_000);
  }
}

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi();
  const { api, base, config, settings } = bench;
  // The deployment's whole settings (its license's issuer key among them); 'log' shows the line ready() waits for.
  const workerEnv = benchEnv(settings, { LOG_LEVEL: 'log' });
  const workers = [new WorkerProcess(workerEnv), new WorkerProcess(workerEnv)];
  const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(QUEUES.workspaces, { connection: redis, prefix: settings.REDIS_PREFIX });
  const db = api.get(DataSource);
  try {
    await Promise.all(workers.map((w) => w.ready()));
    const { image: img, auth } = await registerLocalDesktop(api, { name: image, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2 });
    const user = (await post(base, 'create_user', { ...auth, target_user: { username: 'bench' } })).user as { user_id: string };

    const request = async () => (await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id })).workspace_id as string;
    const untilRunning = async (workspaceId: string) => {
      for (let i = 0; i < 120_000 / POLL_MS; i++) {
        const status = await post(base, 'get_workspace_status', { ...auth, user_id: user.user_id, workspace_id: workspaceId, skip_agent_check: true });
        if ((status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running') return;
        if (status.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(status)}`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      throw new Error(`workspace ${workspaceId} not running within 120 s`);
    };
    const destroy = async (workspaceId: string) => {
      await post(base, 'destroy_workspace', { ...auth, user_id: user.user_id, workspace_id: workspaceId });
      await until('workspace removed', async () => ((await post(base, 'get_workspace_status', { ...auth, user_id: user.user_id, workspace_id: workspaceId })).workspace ? undefined : true));
    };

    const takeover: number[] = [];
    const baseline: number[] = [];
    await destroy(await request().then(async (id) => (await untilRunning(id), id))); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      const start = performance.now();
      const plain = await request();
      await untilRunning(plain);
      baseline.push(performance.now() - start);
      await destroy(plain);

      const killed = await request();
      // Mid-provision: the container exists, the workspace is not running yet; kill the worker that runs it.
      const victim = await until('the provision between container creation and running', async () => {
        const [r] = await db.query('SELECT id, status, container_id FROM workspaces WHERE id = $1', [killed]);
        if (r.status !== 'starting') throw new Error(`provision finished before the kill (${r.status})`);
        const job = r.container_id ? await queue.getJob(jobId.provision(r.id)) : undefined;
        const pid = Number(job?.processedBy?.split(':').pop());
        const index = workers.findIndex((w) => w.child.pid === pid);
        return index >= 0 ? index : undefined;
      });
      const killedAt = performance.now();
      await workers[victim].kill();
      await untilRunning(killed);
      takeover.push(performance.now() - killedAt);
      await destroy(killed);
      workers[victim] = new WorkerProcess(workerEnv);
      await workers[victim].ready();
    }
    console.log(`\nworker takeover (${image}, default WORKER_LOCK_MS ${loadConfig().WORKER_LOCK_MS} ms, 2 worker processes, integrator polls every ${POLL_MS} ms)`);
    console.log(row('SIGKILL mid-provision → running (polling)', takeover));
    console.log(row('request → running, no kill (baseline)', baseline));
    console.log(`ratio at p50: ${(median(takeover) / median(baseline)).toFixed(2)}   at p95: ${(percentile(takeover, 95) / percentile(baseline, 95)).toFixed(2)}   (target: takeover p95 under 10000 ms)`);
  } finally {
    for (const w of workers) await w.kill().catch(() => undefined);
    await queue.close();
    await redis.quit();
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
