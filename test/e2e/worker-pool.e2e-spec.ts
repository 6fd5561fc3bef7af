/**
 * A worker pool (issue 24, point 7): three worker processes (WORKER_CONCURRENCY 2 each) share the queues of one
 * deployment over two Docker engines (this machine's and a second dockerd with mutual TLS, test/e2e/second-engine.ts).
 * 24 workspaces of pre-created users are launched at once and spread over both engines by placement; one worker is
 * SIGKILLed while provisions are in flight; then all 24 are destroyed. Nothing may be lost (each reached running,
 * then was destroyed), orphaned (no container left on either engine) or duplicated (one container ever created per
 * workspace, by Docker's own events; one lifecycle transition of each kind). The repeat schedules exist once each
 * in Redis however many workers upserted them at boot, and each ran at most once per period across the pool.
 * Real api (this process), worker processes (dist/), PostgreSQL, Redis and both engines.
 */
import { DataSource } from 'typeorm';
import { parseId, toWireId } from '@ws/common';
import { JOB_QUEUE, JOBS, SCHEDULED_JOBS } from '@ws/queue';
import { TestKey, waitFor } from './harness';
import { ContainerChange, TwoEngineDeployment } from './two-engine-deployment';
import { JobSchedules, ProvisionJobs, Schedule } from './worker-processes';

jest.setTimeout(300_000);

const WORKSPACES = 24;
const WORKERS = 3;
const WORKER_CONCURRENCY = 2;
/** The period of maintenance.check-server-health: the short schedule whose runs are counted. */
const HEALTH_PERIOD_MS = 1000;

interface Row {
  id: string;
  status: string;
  container_id: string | null;
  hostname: string;
  operational_message: string | null;
}

describe('a worker pool: three workers over two engines, one killed mid-run (issue 24, point 7)', () => {
  let deployment: TwoEngineDeployment;
  let db: DataSource;
  let admin: TestKey;
  let imageId: string;
  let provisions: ProvisionJobs;
  let schedules: JobSchedules;
  let containerChanges: ContainerChange[];
  /** When the three workers were up: the start of the window the schedules' runs are read over. */
  let windowStart: number;
  const users: string[] = [];

  beforeAll(async () => {
    const setupStart = Date.now();
    deployment = await TwoEngineDeployment.start({
      workers: WORKERS, coresPerEngine: 16,
      settings: { WORKER_CONCURRENCY, SERVER_HEALTH_INTERVAL_MS: HEALTH_PERIOD_MS, SERVER_HEALTH_TIMEOUT_MS: 2000 },
    });
    windowStart = Date.now();
    const { api } = deployment;
    db = api.app.get(DataSource);
    provisions = new ProvisionJobs(api.config);
    schedules = new JobSchedules(api.config);
    // A small desktop, as two-engines launches it (half a core each, hard limit; 24 fit on either engine).
    imageId = await deployment.addDesktop('Pool desktop', ['--cores', '0.5', '--memory', '512M', '--x-res', '800', '--y-res', '600']);
    admin = await api.key(['Global Admin']);
    for (let i = 0; i < WORKSPACES; i++) {
      users.push((await api.call('create_user', admin, { target_user: { username: `pool-${i}` } })).body.user.user_id as string);
    }
    containerChanges = await deployment.recordContainerChanges();
    console.warn(`worker pool: two engines, the desktop on both, ${WORKERS} workers and ${WORKSPACES} users ready in ${Date.now() - setupStart} ms`);
  }, 600_000);
  afterAll(async () => {
    await provisions?.close();
    await schedules?.close();
    await deployment?.close();
  });

  const rows = async (ids: string[]): Promise<Row[]> => db.query(
    `SELECT w.id, w.status, w.container_id, s.hostname, w.operational_message FROM workspaces w JOIN servers s ON s.id = w.server_id WHERE w.id = ANY($1::uuid[])`, [ids],
  );
  const countBy = <T>(items: T[], key: (item: T) => string) =>
    items.reduce((counts, item) => counts.set(key(item), (counts.get(key(item)) ?? 0) + 1), new Map<string, number>());

  it('every scheduled job has one job scheduler in Redis, though each of the three workers upserted them all at boot', async () => {
    const found = await schedules.list();
    expect(found.map((s) => s.id).sort()).toEqual([...SCHEDULED_JOBS].sort());
    for (const schedule of found) {
      const name = schedule.id as (typeof SCHEDULED_JOBS)[number];
      expect(schedule).toEqual({ queue: JOB_QUEUE[name], id: name, name, every: name === 'maintenance.check-server-health' ? HEALTH_PERIOD_MS : JOBS[name].everyMs });
    }
  });

  it('24 launches over two engines with a worker SIGKILLed mid-run, then 24 destroys: nothing lost, orphaned or duplicated', async () => {
    const { api, workers } = deployment;
    const launchStart = Date.now();
    // One request after another, as fast as they answer (each only records the row and enqueues): the provisions
    // then run on the workers side by side. (24 requests at once on a machine this busy can wait past the statement
    // bound for one of the two servers' rows and answer 503 with Retry-After, which is not what this is about.)
    const requested = [];
    for (const user of users) requested.push(await api.call('request_workspace', admin, { user_id: user, image_id: imageId }));
    expect(requested.map((res) => res.status)).toEqual(users.map(() => 200));
    const ids = requested.map((res) => parseId(res.body.workspace_id as string) as string);
    const owners = new Map(ids.map((id, i) => [id, users[i]]));

    // The victim: a worker running a provision whose container exists and whose desktop is not yet answering.
    const victim = await waitFor('a provision in flight on a worker', async () => {
      const inFlight = (await rows(ids)).filter((r) => r.status === 'starting' && r.container_id);
      for (const r of inFlight) {
        const pid = await provisions.holderPid(r.id);
        const worker = workers.find((w) => w.pid === pid && w.alive);
        if (worker) return worker;
      }
      if ((await rows(ids)).every((r) => r.status !== 'starting')) throw new Error('every launch finished before a worker could be killed mid-provision');
      return undefined;
    }, 120_000, 20);
    const heldByVictim = await provisions.activeOn(victim.pid);
    await victim.kill('SIGKILL');
    expect(heldByVictim.length).toBeGreaterThan(0);

    // Nothing lost: every workspace runs (a workspace whose worker died too often would fail, with that reason; not here).
    let last: Row[] = [];
    const running = await waitFor('all 24 running', async () => {
      last = await rows(ids);
      const failed = last.filter((r) => r.status === 'failed');
      if (failed.length) throw new Error(`launches failed: ${JSON.stringify(failed)}`);
      return last.every((r) => r.status === 'running') ? last : undefined;
    }, 300_000, 250).catch((err: Error) => {
      throw new Error(`${err.message}; not running: ${JSON.stringify(last.filter((r) => r.status !== 'running'))}`);
    });
    const launchedMs = Date.now() - launchStart;
    // The killed worker's provisions were taken over by the others (a stall each) and finished there.
    for (const id of heldByVictim) {
      const job = await provisions.job(id);
      expect(job?.stalledCounter).toBeGreaterThanOrEqual(1);
      expect(job?.processedBy).not.toMatch(new RegExp(`:${victim.pid}$`));
    }
    // Placed on both engines, each running workspace with exactly one container, the one its row names, on its own engine.
    const perEngine = countBy(running, (r) => r.hostname);
    expect([...perEngine.keys()].sort()).toEqual(['local', 'second']);
    const containers = await deployment.containers();
    for (const r of running) {
      const own = containers.filter((c) => c.workspaceId === r.id);
      expect(own).toEqual([expect.objectContaining({ engine: r.hostname, id: r.container_id, state: 'running' })]);
    }
    expect(containers).toHaveLength(WORKSPACES);

    const destroyStart = Date.now();
    const destroyed = [];
    for (const id of ids) destroyed.push(await api.call('destroy_workspace', admin, { workspace_id: toWireId(id), user_id: owners.get(id) }));
    expect(destroyed.map((res) => res.status)).toEqual(ids.map(() => 200));
    await waitFor('all 24 deleted', async () => ((last = await rows(ids)).every((r) => r.status === 'deleted') ? true : undefined), 180_000, 250).catch((err: Error) => {
      throw new Error(`${err.message}; not deleted: ${JSON.stringify(last.filter((r) => r.status !== 'deleted'))}`);
    });
    const destroyedMs = Date.now() - destroyStart;

    // Nothing orphaned: no container of the deployment on either engine.
    expect(await deployment.containers()).toEqual([]);
    // Nothing duplicated: Docker made exactly one container per workspace, on the engine it was placed on, and removed it.
    await waitFor('Docker reported every removal', async () => (containerChanges.filter((c) => c.action === 'destroy').length >= WORKSPACES ? true : undefined), 30_000, 100);
    const created = containerChanges.filter((c) => c.action === 'create');
    expect(created).toHaveLength(WORKSPACES);
    for (const r of running) {
      expect(created.filter((c) => c.workspaceId === r.id)).toEqual([expect.objectContaining({ engine: r.hostname, id: r.container_id })]);
      expect(containerChanges.filter((c) => c.action === 'destroy' && c.workspaceId === r.id).map((c) => c.id)).toEqual([r.container_id]);
    }
    // And one lifecycle transition of each kind per workspace, in order.
    const events = (await db.query('SELECT workspace_id, type FROM workspace_events WHERE workspace_id = ANY($1::uuid[]) ORDER BY id', [ids])) as Array<{ workspace_id: string; type: string }>;
    for (const id of ids) expect(events.filter((e) => e.workspace_id === id).map((e) => e.type)).toEqual(['requested', 'running', 'stopping', 'destroyed']);

    console.warn(`worker pool: ${WORKSPACES} workspaces, ${JSON.stringify(Object.fromEntries(perEngine))} per engine; worker ${victim.pid} killed holding ${heldByVictim.length} provision(s); all running ${launchedMs} ms after the requests, all deleted ${destroyedMs} ms after the destroys`);
  }, 600_000);

  it('each repeat schedule ran at most once per period across the pool, the killed worker notwithstanding', async () => {
    const healthId = 'maintenance.check-server-health';
    const runsSince = async (queue: Schedule['queue'], id: string, until = Infinity) =>
      (await schedules.runs(queue, id)).filter((r) => r.slot >= windowStart && r.slot <= until);
    // Enough runs of the short schedule to count (a condition, bounded: the launches above usually took longer).
    const enough = 20;
    await waitFor(`${enough} runs of ${healthId}`, async () => ((await runsSince('maintenance', healthId)).length >= enough ? true : undefined), 120_000, 500);
    const windowEnd = Date.now();

    for (const schedule of await schedules.list()) {
      const every = schedule.every as number;
      const runs = await runsSince(schedule.queue, schedule.id, windowEnd);
      // No two runs of one scheduler inside one period: the slots they ran for are a period apart or more, and each
      // started no earlier than its slot. So at most one run per period of the window, not one per worker.
      const closer = runs.slice(1).filter((run, i) => run.slot - runs[i].slot < every);
      expect({ schedule: schedule.id, closer }).toEqual({ schedule: schedule.id, closer: [] });
      expect(runs.filter((run) => run.processedOn < run.slot)).toEqual([]);
      expect(runs.length).toBeLessThanOrEqual(Math.floor((windowEnd - windowStart) / every) + 1);
    }
    const health = await runsSince('maintenance', healthId, windowEnd);
    const periods = (windowEnd - windowStart) / HEALTH_PERIOD_MS;
    console.warn(`worker pool: ${health.length} runs of ${healthId} in ${periods.toFixed(1)} periods, by worker ${JSON.stringify(Object.fromEntries(countBy(health, (r) => r.worker)))}`);
  });
});
