/**
 * Issue 24, point 3: placement locks only the server it picks. Concurrent placements fill every server exactly
 * to its capacity (never over it), spread over the servers, and a placement does not wait for a transaction that
 * holds another server's placement lock, nor turn away from a server whose row another writer (a health round) holds.
 * A launch queued for a row lock past the statement bound runs its transaction again.
 * Rows only: no container is started.
 */
import { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { ApiError, ErrorCode, newId, parseId, randomSecret, toWireId } from '@ws/common';
import { Image, ImagesService } from '@ws/images';
import { PLACEMENT_LOCK_KEY_SQL, Server, ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { countLiveWorkspaces, reserveServer, ServerRetirement, Workspace } from '@ws/workspaces';
import { TestApi, TestKey, waitFor } from './harness';

describe('placement under concurrency (issue 24)', () => {
  let api: TestApi;
  let db: DataSource;
  let image: Image;
  let servers: Server[];

  beforeAll(async () => {
    api = await TestApi.start();
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    // 1 core × overcommit 1.5 = 1.5 offered: three half-core workspaces each.
    servers = [];
    for (const hostname of ['p1', 'p2', 'p3']) {
      servers.push(await api.app.get(ServersService).upsert({ hostname, dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 1, memory: 8 * 1024 ** 3, cpuOvercommit: 1.5 }));
    }
    image = await api.app.get(ImagesService).upsert({ name: 'example/placed:1', friendlyName: 'Placed', cores: 0.5, memory: 256 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
  });
  afterAll(async () => api?.close());

  const row = (server: Server) => {
    const now = new Date();
    return {
      id: newId(), userId: null, imageId: image.id, serverId: server.id, status: 'starting' as const, cores: image.cores, memory: image.memory, token: randomSecret(),
      viewOnlyToken: randomSecret(), shareId: randomSecret(16), startDate: now, keepaliveDate: now, expirationDate: new Date(now.getTime() + 3600_000),
    };
  };
  /** Holds these servers' placement locks in the runner's transaction, as launches in flight would. */
  const holdPlacement = async (runner: QueryRunner, held: Server[]) => {
    for (const server of held) await runner.query(`SELECT pg_advisory_xact_lock(${PLACEMENT_LOCK_KEY_SQL})`, [server.id]);
  };
  const placementsWaiting = async () => {
    const [w] = (await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%pg_advisory_xact_lock(hashtextextended(''ws_placement:''%'`)) as Array<{ n: number }>;
    return w.n > 0 ? true : undefined;
  };
  const place = (tx: EntityManager) => reserveServer(tx, image).then(async (server) => {
    await tx.getRepository(Workspace).insert(row(server));
    return server.hostname;
  });

  /** One placement whose lock waits are bounded: were it to wait for a held lock, lock_timeout fails it instead of a hang. */
  const placeBounded = () => db.transaction(async (tx) => {
    await tx.query(`SET LOCAL lock_timeout = '30s'`);
    return place(tx);
  });

  it('of 14 concurrent placements on 3 servers of 3 slots, exactly 9 land, 3 on each; the rest get NoCapacity', async () => {
    const results = await Promise.allSettled(Array.from({ length: 14 }, () => db.transaction(place)));
    const placed = results.filter((r): r is PromiseFulfilledResult<string> => r.status === 'fulfilled').map((r) => r.value);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as ApiError).code).toBe(ErrorCode.NoCapacity);
    expect(placed).toHaveLength(9);
    expect(placed.sort()).toEqual(['p1', 'p1', 'p1', 'p2', 'p2', 'p2', 'p3', 'p3', 'p3']);
    await db.query(`UPDATE workspaces SET status = 'deleted'`);
  });

  it('a placement does not wait for a transaction holding another server: it takes one that is free', async () => {
    const runner = db.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      // Another transaction holds p1 and p2 (as two placements in flight would).
      await holdPlacement(runner, [servers[0], servers[1]]);
      expect(await placeBounded()).toBe('p3');
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });

  it('a writer holding the roomiest server\'s row (a health round, an operator) neither diverts a placement nor is waited for', async () => {
    await db.query(`UPDATE workspaces SET status = 'deleted'`);
    const [p1, p2, p3] = servers;
    // p1 has the most room; its row is being written (the health round's check time), uncommitted.
    await db.getRepository(Workspace).insert([row(p2), row(p3)]);
    const writer = db.createQueryRunner();
    await writer.connect();
    await writer.startTransaction();
    try {
      await writer.query('UPDATE servers SET health_checked_at = now() WHERE id = $1', [p1.id]);
      expect(await placeBounded()).toBe('p1');
    } finally {
      await writer.rollbackTransaction();
      await writer.release();
      await db.query(`UPDATE workspaces SET status = 'deleted'`);
    }
  });

  it('when every server with room is held, it waits for them rather than answering NoCapacity', async () => {
    const runner = db.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    let settled = false;
    try {
      await holdPlacement(runner, servers);
      const placing = db.transaction(place).finally(() => (settled = true));
      // The placement is blocked on a server's lock: PostgreSQL shows it waiting.
      await waitFor('the placement waiting for a server', placementsWaiting, 15_000, 50);
      expect(settled).toBe(false);
      await runner.rollbackTransaction();
      expect(['p1', 'p2', 'p3']).toContain(await placing);
    } finally {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.release();
    }
  });

  it('a placement waiting for the server with the most room takes another as soon as that one frees up', async () => {
    await db.query(`UPDATE workspaces SET status = 'deleted'`);
    const [p1, p2, p3] = servers;
    // p1 has the most room, so the placement queues for it first.
    await db.getRepository(Workspace).insert([row(p2), row(p3)]);
    const holdFirst = db.createQueryRunner();
    const holdOthers = db.createQueryRunner();
    for (const runner of [holdFirst, holdOthers]) {
      await runner.connect();
      await runner.startTransaction();
    }
    try {
      await holdPlacement(holdFirst, [p1]);
      await holdPlacement(holdOthers, [p2, p3]);
      const placing = db.transaction(place);
      await waitFor('the placement waiting for a server', placementsWaiting, 15_000, 10);
      await holdOthers.rollbackTransaction();
      // p1 is still held: the placement read the room again and took a server that is free now.
      expect(['p2', 'p3']).toContain(await placing);
    } finally {
      for (const runner of [holdFirst, holdOthers]) {
        if (runner.isTransactionActive) await runner.rollbackTransaction();
        await runner.release();
      }
    }
  });

  it('16 concurrent request_workspace calls through the api all succeed (none waits past the statement bound), spread evenly over the servers', async () => {
    const key = await api.key(['Global Admin']);
    const small = await api.app.get(ImagesService).upsert({ name: 'example/burst:1', friendlyName: 'Burst', cores: 0.05, memory: 64 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
    const users = await Promise.all(Array.from({ length: 16 }, (_, i) => api.call('create_user', key, { target_user: { username: `burst-${i}` } })));
    // The servers start equal (the tests above left a half-core workspace on one or two): least allocated first would
    // otherwise rightly fill the emptier ones first.
    await db.query(`UPDATE workspaces SET status = 'deleted'`);
    const answers = await Promise.all(users.map((u) => api.call('request_workspace', key, { user_id: u.body.user.user_id, image_id: toWireId(small.id) })));
    expect(answers.map((a) => [a.status, a.body.error_message])).toEqual(answers.map(() => [200, undefined]));
    const placed = (await db.query(`SELECT s.hostname, count(*)::int AS n FROM workspaces w JOIN servers s ON s.id = w.server_id WHERE w.image_id = $1 AND w.status = 'starting' GROUP BY s.hostname`, [small.id])) as Array<{ hostname: string; n: number }>;
    expect(placed.reduce((sum, p) => sum + p.n, 0)).toBe(16);
    // Dealt out in turn (placement tickets), not by coin toss: launches that read the same allocation still split evenly.
    const counts = placed.map((p) => p.n);
    expect(counts).toHaveLength(3);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(2);
    await db.query(`UPDATE workspaces SET status = 'deleted' WHERE image_id = $1`, [small.id]);
  });

  it('server remove counts under the placement lock: it waits for a launch placing on the server, then refuses', async () => {
    const zone = await api.app.get(ZonesService).ensure('default');
    const p4 = await api.app.get(ServersService).upsert({ hostname: 'p4', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 1, memory: 8 * 1024 ** 3 });
    const retirement = api.app.get(ServerRetirement);
    const launch = db.createQueryRunner();
    await launch.connect();
    await launch.startTransaction();
    try {
      await holdPlacement(launch, [p4]);
      let settled = false;
      const removing = retirement.remove('p4').then(() => 'removed', (err: ApiError) => err.code).finally(() => (settled = true));
      await waitFor('the removal waiting for the placement', placementsWaiting, 15_000, 50);
      expect(settled).toBe(false);
      // The launch commits its workspace on p4: the removal, counting after it, refuses.
      await launch.manager.getRepository(Workspace).insert(row(p4));
      await launch.commitTransaction();
      expect(await removing).toBe(ErrorCode.Conflict);
      await db.query('DELETE FROM workspaces WHERE server_id = $1', [p4.id]);
      await retirement.remove('p4');
      expect(await db.getRepository(Server).findOneBy({ id: p4.id })).toBeNull();
    } finally {
      if (launch.isTransactionActive) await launch.rollbackTransaction();
      await launch.release();
    }
  });

  it('the seat counter (a trigger on workspaces) stays equal to the live rows through inserts, status changes and deletes', async () => {
    const live = async () => Number((await db.query(`SELECT count(*) AS n FROM workspaces WHERE status <> 'deleted'`))[0].n);
    const counted = () => db.transaction((tx) => countLiveWorkspaces(tx));
    const before = await live();
    const rows = Array.from({ length: 6 }, () => row(servers[0]));
    await Promise.all(rows.map((r) => db.transaction((tx) => tx.getRepository(Workspace).insert(r))));
    expect(await counted()).toBe(await live());
    await db.query(`UPDATE workspaces SET status = 'failed' WHERE id = $1`, [rows[0].id]);
    await db.query(`UPDATE workspaces SET status = 'deleted' WHERE id = ANY($1)`, [[rows[1].id, rows[2].id]]);
    await db.query('DELETE FROM workspaces WHERE id = ANY($1)', [[rows[2].id, rows[3].id]]);
    // A rolled-back change leaves the counter as it was.
    await db.transaction(async (tx) => {
      await tx.query(`UPDATE workspaces SET status = 'deleted' WHERE id = $1`, [rows[4].id]);
      throw new Error('rolled back');
    }).catch(() => undefined);
    expect(await live()).toBe(before + 3);
    expect(await counted()).toBe(before + 3);
  });
});

describe('a launch queued for a row lock past the statement bound (issue 24)', () => {
  let api: TestApi;
  let db: DataSource;
  let key: TestKey;
  let imageId: string;

  beforeAll(async () => {
    // A short statement bound, so a held seat row cancels the launch's wait within a second.
    api = await TestApi.start({ DEPENDENCY_TIMEOUT_MS: 1000 });
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'q1', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 8 * 1024 ** 3 });
    imageId = toWireId((await api.app.get(ImagesService).upsert({ name: 'example/queued:1', friendlyName: 'Queued', cores: 0.5, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    key = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  /** Starts of the statements now waiting for the seat counter's row lock. */
  const seatWaits = async () => ((await db.query(
    `SELECT query_start FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM session_seats WHERE id = 1 FOR UPDATE%'`,
  )) as Array<{ query_start: Date }>).map((r) => r.query_start.getTime());

  /** Holds the seat row while the launch's wait is cancelled `cancellations` times; answers the launch's outcome. */
  async function launchWhileSeatHeld(cancellations: number) {
    const user = await api.call('create_user', key, { target_user: { username: `queued-${cancellations}-${randomSecret(4)}` } });
    const holder = db.createQueryRunner();
    await holder.connect();
    await holder.startTransaction();
    try {
      await holder.query('SELECT admitted FROM session_seats WHERE id = 1 FOR UPDATE');
      const launching = api.call('request_workspace', key, { user_id: user.body.user.user_id, image_id: imageId }).then((r) => r);
      const seen = new Set<number>();
      // Each cancelled wait is followed by a new one (the transaction runs again) until the attempts are used up.
      await waitFor(`${cancellations + 1} waits for the seat row`, async () => {
        for (const start of await seatWaits()) seen.add(start);
        return seen.size > cancellations ? true : undefined;
      }, 30_000, 20);
      await holder.commitTransaction();
      return await launching;
    } finally {
      if (holder.isTransactionActive) await holder.rollbackTransaction();
      await holder.release();
    }
  }

  it('runs its transaction again: held through one cancelled wait, the launch still succeeds', async () => {
    const answer = await launchWhileSeatHeld(1);
    expect([answer.status, answer.body.error_message]).toEqual([200, undefined]);
  });

  it('answers 503 (retry later) when every attempt waited past the bound, and leaves no workspace', async () => {
    const user = await api.call('create_user', key, { target_user: { username: `queued-out-${randomSecret(4)}` } });
    const holder = db.createQueryRunner();
    await holder.connect();
    await holder.startTransaction();
    try {
      await holder.query('SELECT admitted FROM session_seats WHERE id = 1 FOR UPDATE');
      const answer = await api.call('request_workspace', key, { user_id: user.body.user.user_id, image_id: imageId });
      expect(answer.status).toBe(503);
      expect(Number(answer.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await holder.rollbackTransaction();
      await holder.release();
    }
    const rows = await db.query('SELECT count(*)::int AS n FROM workspaces WHERE user_id = $1', [parseId(user.body.user.user_id)]);
    expect(rows[0].n).toBe(0);
  });
});
