/**
 * Host health (issue 24, point 2): the worker pings every enabled server; one that stops answering is marked down
 * with the reason and the time, gets no new workspaces, and its workspaces report that their host is unreachable
 * without being destroyed; when it answers again it is marked up and reconciled at once (a container removed by
 * hand meanwhile is reported as vanished, as the reconciler always does).
 *
 * The second "host" is this machine's engine behind a TCP proxy the test makes on loopback (node `net` piping to
 * /var/run/docker.sock): stopping the proxy is the host going away. Real api, worker, PostgreSQL, Redis and Docker.
 */
import { createConnection, createServer, Server as NetServer, Socket } from 'node:net';
import { DataSource } from 'typeorm';
import { LABELS } from '@ws/agent';
import { newId, parseId, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { runCli as cli, useApiForCli } from './cli-runner';
import { waitForRemovedWorkspace, waitForRunningWorkspace } from './fixtures';
import { desktopImage, freePort, localDocker, TestApi, TestKey, TIMESTAMP, waitFor } from './harness';

/** A loopback TCP port that forwards to the local Docker socket while started. */
class DockerProxy {
  private server: NetServer | null = null;
  private readonly sockets = new Set<Socket>();

  constructor(readonly port: number) {}

  /** `silent`: accepts connections and never answers (a host that hangs rather than refuses). */
  async start(mode: 'forward' | 'silent' = 'forward'): Promise<void> {
    const server = createServer((client) => {
      if (mode === 'silent') {
        this.sockets.add(client);
        client.on('close', () => this.sockets.delete(client));
        client.on('error', () => undefined);
        return;
      }
      const upstream = createConnection({ path: '/var/run/docker.sock' });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
  }

  /** Refuses new connections and cuts the open ones: the host is gone. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

interface ServerRow { hostname: string; health: string; health_reason: string | null; health_checked_at: string | null; down_since: string | null }

describe('host health: a server that stops answering is marked down, skipped and reconciled when back (issue 24)', () => {
  let api: TestApi;
  let admin: TestKey;
  let key: TestKey;
  let db: DataSource;
  let proxy: DockerProxy;
  let userId: string;
  let imageId: string;
  let pinnedImageId: string;
  let stagedImageId: string;
  let zoneId: string;
  let restoreEnv: () => Promise<void> = async () => undefined;

  beforeAll(async () => {
    proxy = new DockerProxy(await freePort());
    await proxy.start();
    // A check every 300 ms; each ping may take 5 s: on a machine busy with other suites the proxy in this process can
    // answer a ping late, and a host marked down for that would send a launch elsewhere.
    api = await TestApi.start({ SERVER_HEALTH_INTERVAL_MS: 300, SERVER_HEALTH_TIMEOUT_MS: 5000 }, { worker: true });
    restoreEnv = useApiForCli(api);
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    const servers = api.app.get(ServersService);
    // The proxied host offers far more cores, so placement picks it while it is up.
    await servers.upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 1, memory: 8 * 1024 ** 3 });
    const far = await servers.upsert({ hostname: 'far', dockerEndpoint: `tcp://127.0.0.1:${proxy.port}`, zone, cores: 16, memory: 16 * 1024 ** 3 });
    const images = api.app.get(ImagesService);
    const desktop = { name: desktopImage(), cores: 0.25, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } };
    imageId = toWireId((await images.upsert({ ...desktop, friendlyName: 'Health desktop' })).id);
    pinnedImageId = toWireId((await images.upsert({ ...desktop, friendlyName: 'Pinned to far', restrictToServer: true, serverId: far.id })).id);
    stagedImageId = toWireId((await images.upsert({ ...desktop, friendlyName: 'Staged desktop' })).id);
    zoneId = toWireId(zone.id);
    admin = await api.key(['Global Admin']);
    key = await api.key(['Users Auth Session', 'User']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'health-user' } })).body.user.user_id;
  });
  afterAll(async () => {
    await restoreEnv();
    await proxy?.start().catch(() => undefined); // destroy needs the host back; close() removes what is left
    await api?.close();
    await proxy?.stop();
  });

  const serverNamed = async (hostname: string): Promise<ServerRow> => (JSON.parse(await cli('server', 'list', '--json')) as ServerRow[]).find((s) => s.hostname === hostname) as ServerRow;
  const launch = async (image = imageId) => {
    const res = await api.call('request_workspace', key, { user_id: userId, image_id: image });
    expect(res.status).toBe(200);
    return (await waitForRunningWorkspace(api, key, res.body.workspace_id, userId)).workspace as { workspace_id: string; hostname: string; container_id: string };
  };
  const status = (workspaceId: string) => api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
  const listed = async (workspaceId: string) =>
    ((await api.call('get_workspaces', admin)).body.workspaces as Array<Record<string, any>>).find((w) => w.workspace_id === workspaceId); // eslint-disable-line @typescript-eslint/no-explicit-any

  it('marks the host down, keeps its workspaces, places elsewhere, and reconciles it when it answers again', async () => {
    // Both hosts answer: the check has run and says so.
    await waitFor('both servers checked', async () => ((await serverNamed('far')).health_checked_at && (await serverNamed('local')).health_checked_at ? true : undefined), 30_000);
    expect(await serverNamed('far')).toEqual(expect.objectContaining({ health: 'up', health_reason: null, down_since: null, health_checked_at: expect.stringMatching(TIMESTAMP) }));

    const kept = await launch();
    const removedMeanwhile = await launch();
    const destroyedMeanwhile = await launch();
    expect([kept.hostname, removedMeanwhile.hostname, destroyedMeanwhile.hostname]).toEqual(['far', 'far', 'far']);
    // The row's own message (the launch's last step) while its host is up.
    const ownMessage = (await listed(kept.workspace_id))?.operational_message;
    expect(ownMessage).not.toMatch(/unreachable/);

    // The host goes away.
    await proxy.stop();
    const down = await waitFor('far marked down', async () => {
      const s = await serverNamed('far');
      return s.health === 'down' ? s : undefined;
    }, 30_000);
    // Refused, or cut: a check in flight when the host went (or one on a pooled connection it had cut) hangs up.
    expect(down).toEqual(expect.objectContaining({ health_reason: expect.stringMatching(/ECONNREFUSED|connect|socket hang up|ECONNRESET/i), down_since: expect.stringMatching(TIMESTAMP) }));
    expect((await serverNamed('local')).health).toBe('up');

    // Its workspaces still exist and say their host is unreachable, in get_workspace_status and get_workspaces.
    const unreachable = await status(kept.workspace_id);
    expect(unreachable.status).toBe(200);
    expect(unreachable.body).toEqual({
      error_message: expect.stringContaining('is unreachable'),
      operational_message: expect.stringMatching(/^The workspace's host far is unreachable since .+ \(.*\); the workspace is kept/),
      operational_progress: expect.any(Number),
      operational_status: 'running',
      server: { server_id: expect.any(String), hostname: 'far', health: 'down', health_reason: down.health_reason, health_checked_at: expect.stringMatching(TIMESTAMP), down_since: down.down_since },
    });
    const item = await listed(kept.workspace_id);
    expect(item).toEqual(expect.objectContaining({
      operational_status: 'running', operational_message: expect.stringContaining('host far is unreachable'),
      server: expect.objectContaining({ hostname: 'far', health: 'down', health_reason: down.health_reason, down_since: down.down_since }),
    }));
    const rows = await db.query('SELECT status FROM workspaces WHERE id = ANY($1::uuid[])', [[parseId(kept.workspace_id), parseId(removedMeanwhile.workspace_id)]]);
    expect(rows.map((r: { status: string }) => r.status)).toEqual(['running', 'running']);

    // New launches go to the host that answers; an image only the down host may run gets the no-capacity answer.
    const elsewhere = await launch();
    expect(elsewhere.hostname).toBe('local');
    const refused = await api.call('request_workspace', key, { user_id: userId, image_id: pinnedImageId });
    expect(refused.status).toBe(503);
    expect(refused.body.error_message).toMatch(/every server that can run image Pinned to far is unreachable/);

    // While it is away a container disappears from it (removed on the engine directly), and an orphan appears on it
    // (this deployment's labels, a workspace id no live workspace has).
    await localDocker().remove(removedMeanwhile.container_id);
    // And its user ends a workspace on it: the removal waits for the host (the row stays, stopping).
    expect((await api.call('destroy_workspace', key, { workspace_id: destroyedMeanwhile.workspace_id, user_id: userId })).status).toBe(200);
    expect((await status(destroyedMeanwhile.workspace_id)).body).toEqual(expect.objectContaining({ operational_status: 'stopping', operational_message: expect.stringContaining('host far is unreachable') }));
    const orphan = await localDocker().docker.createContainer({
      Image: desktopImage(), Entrypoint: ['sleep'], Cmd: ['300'], Labels: { [LABELS.deploymentId]: api.config.DEPLOYMENT_ID, [LABELS.workspaceId]: newId() },
    });

    // The host answers again: up, the message clears, and the reconciler has run against it at once.
    await proxy.start();
    await waitFor('far marked up', async () => ((await serverNamed('far')).health === 'up' ? true : undefined), 30_000);
    expect(await serverNamed('far')).toEqual(expect.objectContaining({ health_reason: null, down_since: null }));
    // The stored status (skip_agent_check): only the reconciler can have changed it, not this read asking Docker.
    const vanished = await waitFor('the vanished container reported', async () => {
      const res = await api.call('get_workspace_status', key, { workspace_id: removedMeanwhile.workspace_id, user_id: userId, skip_agent_check: true });
      return res.body.operational_status === 'stopped' ? res.body : undefined;
    }, 30_000);
    expect(vanished.operational_message).toBe('The workspace container vanished from its server');
    await waitForRemovedWorkspace(api, key, destroyedMeanwhile.workspace_id, userId);
    expect((await api.containers()).map((c) => c.id)).not.toContain(destroyedMeanwhile.container_id);
    await waitFor('the orphan removed', async () => ((await api.containers()).some((c) => c.id === orphan.id) ? undefined : true), 30_000);
    const back = await status(kept.workspace_id);
    expect(back.body.workspace).toEqual(expect.objectContaining({ operational_status: 'running', hostname: 'far' }));
    expect(await listed(kept.workspace_id)).toEqual(expect.objectContaining({ operational_message: ownMessage, server: expect.objectContaining({ health: 'up', down_since: null }) }));
    // And it takes new work again.
    expect((await launch()).hostname).toBe('far');
  });

  it('a host that accepts connections but never answers is marked down within the bound of its checks', async () => {
    const hangs = 'Docker on server far did not answer "ping" within 5000 ms';
    await proxy.stop();
    await proxy.start('silent');
    try {
      // Switching the proxy cuts its pooled connections, so a check in flight may first mark it down as "socket hang
      // up"; the checks after it meet the silent host, and each ends at its bound (two tries of 5 s).
      const down = await waitFor('far marked down as not answering', async () => {
        const s = await serverNamed('far');
        return s.health === 'down' && s.health_reason === hangs ? s : undefined;
      }, 30_000);
      expect(down.down_since).toEqual(expect.stringMatching(TIMESTAMP));
    } finally {
      await proxy.stop();
      await proxy.start();
    }
    await waitFor('far marked up', async () => ((await serverNamed('far')).health === 'up' ? true : undefined), 30_000);
  });

  it('a staged desktop on a host marked down is not handed out: the pool refills on a host that answers', async () => {
    const created = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: stagedImageId, num_sessions: 1, expiration: 1 } });
    expect(created.body).toEqual(expect.objectContaining({ staging_config: expect.any(Object) }));
    const configId = parseId(created.body.staging_config.staging_config_id);
    const pool = async () => (await db.query(
      `SELECT w.id, w.status, s.hostname FROM workspaces w JOIN servers s ON s.id = w.server_id
        WHERE w.staging_config_id = $1 AND w.user_id IS NULL AND w.assigned_at IS NULL AND w.status IN ('starting', 'running')`, [configId],
    )) as Array<{ id: string; status: string; hostname: string }>;
    const onlyRunningOn = (hostname: string) => async () => {
      const rows = await pool();
      const ready = rows.filter((r) => r.status === 'running' && r.hostname === hostname);
      return ready.length === 1 ? ready[0].id : undefined;
    };
    const onFar = await waitFor('a staged desktop on far', onlyRunningOn('far'), 120_000, 250);

    await proxy.stop();
    await waitFor('far marked down', async () => ((await serverNamed('far')).health === 'down' ? true : undefined), 30_000);
    // Not counted while its host is away: the pool refills on the host that answers, and a claim takes that one.
    const onLocal = await waitFor('a staged desktop on local', onlyRunningOn('local'), 120_000, 250);
    const claimed = await api.call('request_workspace', key, { user_id: userId, image_id: stagedImageId });
    expect(claimed.status).toBe(200);
    expect(parseId(claimed.body.workspace_id)).toBe(onLocal);
    expect((await pool()).map((r) => r.id)).toContain(onFar);

    // Back: the far desktop counts again, and the pool settles at its size (a surplus is trimmed as usual).
    await proxy.start();
    await waitFor('far marked up', async () => ((await serverNamed('far')).health === 'up' ? true : undefined), 30_000);
    await waitFor('the pool back at one ready desktop', async () => {
      const rows = await pool();
      return rows.length === 1 && rows[0].status === 'running' ? true : undefined;
    }, 120_000, 250);
  });
});
