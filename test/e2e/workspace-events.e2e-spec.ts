import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { randomSecret } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { appendWorkspaceEvents, OutboxSignal, WorkspaceEventType, WorkspaceLifecycle, WorkspaceRuntime } from '@ws/workspaces';
import { ZonesService } from '@ws/zones';
import { desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { PrivateRedis } from './private-redis';
import { WorkerProcess } from './worker-processes';

/** The subscriber every worker has (workspace-event-log.subscriber.ts); its deliveries are recorded per event. */
const SUBSCRIBER = 'event-log';

interface Delivery {
  id: string;
  event_id: string;
  workspace_id: string;
  type: WorkspaceEventType;
  delivered_by: string;
}

const deliveries = (db: DataSource, workspaceIds: string[]): Promise<Delivery[]> =>
  db.query(
    `SELECT d.id, d.event_id, d.workspace_id, e.type, d.delivered_by FROM workspace_event_deliveries d JOIN workspace_events e ON e.id = d.event_id
      WHERE d.subscriber = $1 AND d.workspace_id = ANY($2) ORDER BY d.id`,
    [SUBSCRIBER, workspaceIds],
  );

/** What must hold of the deliveries of `events`: each event exactly once, and per workspace in outbox order. */
function checkOnceInOrder(events: Array<{ id: string; workspace_id: string }>, delivered: Delivery[]): void {
  const counts = new Map<string, number>();
  for (const d of delivered) counts.set(d.event_id, (counts.get(d.event_id) ?? 0) + 1);
  expect(events.filter((e) => counts.get(e.id) !== 1).map((e) => `${e.id}×${counts.get(e.id) ?? 0}`)).toEqual([]);
  expect(delivered).toHaveLength(events.length);
  const byWorkspace = new Map<string, bigint[]>();
  for (const d of delivered) byWorkspace.set(d.workspace_id, [...(byWorkspace.get(d.workspace_id) ?? []), BigInt(d.event_id)]);
  for (const [workspaceId, ids] of byWorkspace) {
    const sorted = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect({ workspaceId, ids: ids.map(String) }).toEqual({ workspaceId, ids: sorted.map(String) });
  }
}

describe('workspace lifecycle events: outbox and relay', () => {
  describe('a workspace on real Docker, worker in process', () => {
    let api: TestApi;
    let admin: TestKey;
    let db: DataSource;
    let imageId: string;

    beforeAll(async () => {
      api = await TestApi.start({}, { worker: true });
      db = api.app.get(DataSource);
      const zone = await api.app.get(ZonesService).ensure('default');
      await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
      const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
      imageId = image.id.replace(/-/g, '');
      admin = await api.key(['Global Admin']);
    });
    afterAll(async () => api?.close());

    it('request → running → destroy records requested, running, stopping, destroyed, each delivered once and in order', async () => {
      const user = (await api.call('create_user', admin, { target_user: { username: `events-${randomSecret(4)}` } })).body.user.user_id as string;
      const requested = await api.call('request_workspace', admin, { user_id: user, image_id: imageId });
      expect(requested.status).toBe(200);
      const [{ id }] = (await db.query('SELECT id FROM workspaces WHERE id = $1', [requested.body.workspace_id])) as Array<{ id: string }>;
      await waitFor('workspace running', async () => {
        const [row] = (await db.query('SELECT status, operational_message FROM workspaces WHERE id = $1', [id])) as Array<{ status: string; operational_message: string }>;
        if (row.status === 'failed') throw new Error(`workspace failed: ${row.operational_message}`);
        return row.status === 'running' ? true : undefined;
      }, 120_000, 100);
      expect((await api.call('destroy_workspace', admin, { workspace_id: requested.body.workspace_id, user_id: user })).status).toBe(200);
      // A second destroy while stopping changes nothing and records nothing.
      await api.call('destroy_workspace', admin, { workspace_id: requested.body.workspace_id, user_id: user });

      const events = await waitFor('the destroyed event', async () => {
        const rows = (await db.query('SELECT id, workspace_id, type, payload FROM workspace_events WHERE workspace_id = $1 ORDER BY id', [id])) as Array<{ id: string; workspace_id: string; type: string; payload: Record<string, unknown> }>;
        return rows.some((e) => e.type === 'destroyed') ? rows : undefined;
      }, 120_000, 100);
      expect(events.map((e) => [e.type, e.payload.status])).toEqual([['requested', 'starting'], ['running', 'running'], ['stopping', 'stopping'], ['destroyed', 'deleted']]);
      expect(events[2].payload.reason).toBe('requested');
      const delivered = await waitFor('all four delivered', async () => {
        const d = await deliveries(db, [id]);
        return d.length >= 4 ? d : undefined;
      }, 60_000, 100);
      checkOnceInOrder(events, delivered);
      expect(delivered.map((d) => d.type)).toEqual(['requested', 'running', 'stopping', 'destroyed']);
    }, 300_000);

    it('a container that vanished records failed; an expiry records expired then stopping, then destroyed', async () => {
      const user = (await api.call('create_user', admin, { target_user: { username: `events-${randomSecret(4)}` } })).body.user.user_id as string;
      const requested = await api.call('request_workspace', admin, { user_id: user, image_id: imageId });
      expect(requested.status).toBe(200);
      const [{ id }] = (await db.query('SELECT id FROM workspaces WHERE id = $1', [requested.body.workspace_id])) as Array<{ id: string }>;
      const row = () => db.query('SELECT status, container_id FROM workspaces WHERE id = $1', [id]).then((r: Array<{ status: string; container_id: string }>) => r[0]);
      const { container_id: containerId } = await waitFor('workspace running', async () => ((await row()).status === 'running' ? row() : undefined), 120_000, 100);
      await localDocker().remove(containerId);
      // get_workspace_status asks the engine and fails the workspace.
      expect((await api.call('get_workspace_status', admin, { workspace_id: requested.body.workspace_id, user_id: user })).body.operational_status).toBe('stopped');
      await db.query(`UPDATE workspaces SET expiration_date = now() - interval '1 second' WHERE id = $1`, [id]);
      await (api.worker as NonNullable<TestApi['worker']>).get(WorkspaceRuntime).reap();

      const events = await waitFor('the destroyed event', async () => {
        const rows = (await db.query('SELECT id, workspace_id, type, payload FROM workspace_events WHERE workspace_id = $1 ORDER BY id', [id])) as Array<{ id: string; workspace_id: string; type: string; payload: Record<string, unknown> }>;
        return rows.some((e) => e.type === 'destroyed') ? rows : undefined;
      }, 120_000, 100);
      expect(events.map((e) => [e.type, e.payload.status])).toEqual([
        ['requested', 'starting'], ['running', 'running'], ['failed', 'failed'], ['expired', 'stopping'], ['stopping', 'stopping'], ['destroyed', 'deleted'],
      ]);
      expect(events[2].payload).toMatchObject({ from: 'running', message: expect.stringMatching(/^The workspace container stopped/) });
      expect(events[4].payload.reason).toBe('expired');
      const delivered = await waitFor('all six delivered', async () => {
        const d = await deliveries(db, [id]);
        return d.length >= 6 ? d : undefined;
      }, 60_000, 100);
      checkOnceInOrder(events, delivered);
    }, 300_000);

    it('a change the worker commits tells its relay once it is committed (no wait for the poll); a change that does not hold tells nothing', async () => {
      const worker = api.worker as NonNullable<TestApi['worker']>;
      const user = (await api.call('create_user', admin, { target_user: { username: `events-${randomSecret(4)}` } })).body.user.user_id as string;
      const requested = await api.call('request_workspace', admin, { user_id: user, image_id: imageId });
      expect(requested.status).toBe(200);
      const [{ id }] = (await db.query('SELECT id FROM workspaces WHERE id = $1', [requested.body.workspace_id])) as Array<{ id: string }>;
      await waitFor('workspace running', async () => ((await db.query('SELECT status FROM workspaces WHERE id = $1', [id]))[0].status === 'running' ? true : undefined), 120_000, 100);
      await waitFor('its running event delivered', async () => ((await deliveries(db, [id])).some((d) => d.type === 'running') ? true : undefined), 60_000, 100);

      // What the relay's listener would see at each notice: another connection reads the failed events then.
      const seen: Array<Promise<number>> = [];
      const failedEvents = () => db.query(`SELECT count(*)::int AS n FROM workspace_events WHERE workspace_id = $1 AND type = 'failed'`, [id]).then((r: Array<{ n: number }>) => r[0].n);
      const stop = worker.get(OutboxSignal).onCommitted(() => seen.push(failedEvents()));
      try {
        const lifecycle = worker.get(WorkspaceLifecycle);
        expect(await lifecycle.fail(id, 'running', 'failed by the test')).toBe(true);
        expect(await lifecycle.fail(id, 'running', 'failed again')).toBe(false); // no longer running: nothing changes
      } finally {
        stop();
      }
      expect(await Promise.all(seen)).toEqual([1]);
      await waitFor('the failed event delivered', async () => ((await deliveries(db, [id])).some((d) => d.type === 'failed') ? true : undefined), 60_000, 100);
      expect((await api.call('destroy_workspace', admin, { workspace_id: requested.body.workspace_id, user_id: user })).status).toBe(200);
      await waitFor('destroyed', async () => ((await db.query('SELECT status FROM workspaces WHERE id = $1', [id]))[0].status === 'deleted' ? true : undefined), 120_000, 100);
    }, 300_000);
  });

  describe('relay across worker processes killed with SIGKILL', () => {
    let api: TestApi;
    let db: DataSource;
    const workers: WorkerProcess[] = [];

    beforeAll(async () => {
      api = await TestApi.start({});
      db = api.app.get(DataSource);
    });
    afterAll(async () => {
      for (const w of workers) await w.kill('SIGKILL').catch(() => undefined);
      await api?.close();
    });
    const spawnWorker = async () => {
      const w = WorkerProcess.spawn(api.settings);
      workers.push(w);
      await w.ready();
      return w;
    };

    it('events written by concurrent transactions arrive once each, in order per workspace, while the relaying worker is SIGKILLed and replaced', async () => {
      const first = await spawnWorker();
      const workspaceIds = Array.from({ length: 12 }, () => randomUUID());
      const perWorkspace = 40;
      const types: WorkspaceEventType[] = ['requested', 'running', 'failed', 'stopping', 'destroyed'];
      // Concurrent writers, one per workspace, each event in its own transaction (as state changes are).
      const write = (from: number, to: number) => Promise.all(workspaceIds.map(async (workspaceId) => {
        for (let n = from; n < to; n++) {
          await db.transaction((tx) => appendWorkspaceEvents(tx, workspaceId, [{ type: types[n % types.length], payload: { status: 'starting', n } }]));
        }
      }));
      const firstHalf = write(0, perWorkspace / 2);

      // Kill the relaying worker once it has delivered some of them; more are written with no worker up, and two
      // workers take over from the first one's last commit, side by side (never both delivering one event).
      await waitFor('the first worker relaying', async () => ((await deliveries(db, workspaceIds)).length >= 40 ? true : undefined), 120_000, 10);
      await first.kill('SIGKILL');
      await firstHalf;
      const deliveredBeforeKill = (await deliveries(db, workspaceIds)).length;
      const secondHalf = write(perWorkspace / 2, perWorkspace);
      const successors = await Promise.all([spawnWorker(), spawnWorker()]);
      await secondHalf;

      const events = (await db.query('SELECT id, workspace_id FROM workspace_events WHERE workspace_id = ANY($1) ORDER BY id', [workspaceIds])) as Array<{ id: string; workspace_id: string }>;
      expect(events).toHaveLength(workspaceIds.length * perWorkspace);
      const delivered = await waitFor('every event delivered', async () => {
        const d = await deliveries(db, workspaceIds);
        return d.length >= events.length ? d : undefined;
      }, 180_000, 100);
      checkOnceInOrder(events, delivered);
      // The first worker delivered before its kill, its successors after (where its last commit left).
      const by = new Set(delivered.map((d) => d.delivered_by.split(':').pop()));
      expect(by.has(String(first.pid))).toBe(true);
      expect(successors.some((w) => by.has(String(w.pid)))).toBe(true);
      expect([...by].every((pid) => [first, ...successors].some((w) => String(w.pid) === pid))).toBe(true);
      expect(deliveredBeforeKill).toBeLessThan(events.length);
      // Per workspace, the payloads arrive in the order they were written.
      const payloads = (await db.query(
        `SELECT e.workspace_id, (e.payload->>'n')::int AS n FROM workspace_event_deliveries d JOIN workspace_events e ON e.id = d.event_id
          WHERE d.subscriber = $1 AND d.workspace_id = ANY($2) ORDER BY d.id`,
        [SUBSCRIBER, workspaceIds],
      )) as Array<{ workspace_id: string; n: number }>;
      for (const workspaceId of workspaceIds) {
        expect(payloads.filter((p) => p.workspace_id === workspaceId).map((p) => p.n)).toEqual(Array.from({ length: perWorkspace }, (_, i) => i));
      }
    }, 400_000);
  });

  describe('relay while Redis is lost', () => {
    let api: TestApi;
    let db: DataSource;
    let redis: PrivateRedis;
    let worker: WorkerProcess | null = null;

    beforeAll(async () => {
      redis = await PrivateRedis.start();
      api = await TestApi.start({ REDIS_URL: redis.url });
      db = api.app.get(DataSource);
    });
    afterAll(async () => {
      await worker?.kill('SIGKILL').catch(() => undefined);
      await api?.close();
      await redis?.stop();
    });

    it('events keep arriving once each, in order, while Redis is down and after it comes back empty', async () => {
      worker = WorkerProcess.spawn(api.settings);
      await worker.ready();
      const workspaceIds = Array.from({ length: 4 }, () => randomUUID());
      let n = 0;
      const writeRound = async (count: number) => {
        for (let i = 0; i < count; i++, n++) {
          await db.transaction((tx) => appendWorkspaceEvents(tx, workspaceIds[n % workspaceIds.length], [{ type: 'running', payload: { status: 'running', n } }]));
        }
      };
      const allDelivered = (count: number) =>
        waitFor(`${count} events delivered`, async () => ((await deliveries(db, workspaceIds)).length >= count ? true : undefined), 120_000, 50);

      await writeRound(8);
      await allDelivered(8);
      await redis.stop(); // every job, schedule and lock with it: nothing is persisted
      await writeRound(12);
      await allDelivered(20);
      await redis.restart();
      await writeRound(8);
      await allDelivered(28);
      expect(worker.alive).toBe(true);

      const events = (await db.query('SELECT id, workspace_id FROM workspace_events WHERE workspace_id = ANY($1) ORDER BY id', [workspaceIds])) as Array<{ id: string; workspace_id: string }>;
      expect(events).toHaveLength(28);
      checkOnceInOrder(events, await deliveries(db, workspaceIds));
    }, 300_000);
  });
});
