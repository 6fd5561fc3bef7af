import Docker from 'dockerode';
import { DataSource } from 'typeorm';
import { AppConfig, parseId, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { Metrics } from '@ws/metrics';
import { Server, ServersService } from '@ws/servers';
import { ServerRetirement, WorkspaceRuntime } from '@ws/workspaces';
import { ZonesService } from '@ws/zones';
import { desktopImage, localDocker, tcpProbeCommand, TestApi, TestKey, waitFor } from './harness';

/**
 * Network holders (issue 25, point 3: a cold start near a bare `docker run`): a launch's container joins a network
 * namespace made in advance on the isolated workspace network instead of making its own. Real api, worker,
 * PostgreSQL, Redis and Docker: the pool fills, a launch claims one holder (its container in the holder's namespace,
 * its desktop reached through the holder's published port), the pool refills, destroy removes the holder, and the
 * reconciler removes a holder whose claimant is gone while free ones stay.
 */
describe('network holders: a launch joins a namespace made in advance', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;
  let runtime: WorkspaceRuntime;
  let imageId: string;
  let server: Server;

  beforeAll(async () => {
    api = await TestApi.start({ NETWORK_POOL_SIZE: 2, NETWORK_POOL_IMAGE: desktopImage(), STAGING_REFILL_DELAY_MS: 0 }, { worker: true });
    db = api.app.get(DataSource);
    runtime = api.app.get(WorkspaceRuntime);
    const zone = await api.app.get(ZonesService).ensure('default');
    server = await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 64 * 1024 ** 3 });
    const desktop = { name: desktopImage(), cores: 0.25, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } };
    imageId = toWireId((await api.app.get(ImagesService).upsert({ ...desktop, friendlyName: 'Holder desktop' })).id);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  const rows = () =>
    db.query('SELECT container_id, workspace_id, host_ports FROM network_holders WHERE server_id = $1 ORDER BY created_at', [server.id]) as Promise<
      Array<{ container_id: string; workspace_id: string | null; host_ports: Record<string, number> }>
    >;
  const freeHolders = async () => (await rows()).filter((r) => r.workspace_id === null);
  /** Until exactly `n` free holders are recorded, each a running container of this deployment. */
  const poolOf = (n: number) =>
    waitFor(`${n} free network holders`, async () => {
      const free = await freeHolders();
      if (free.length !== n) return undefined;
      const running = new Set((await api.containers()).filter((c) => c.state === 'running').map((c) => c.id));
      return free.every((r) => running.has(r.container_id)) ? free : undefined;
    }, 120_000, 250);

  const createUser = async (username: string) => (await api.call('create_user', admin, { target_user: { username } })).body.user.user_id as string;
  /** request_workspace for `userId` until get_workspace_status says running: its id and the status's workspace. */
  const launchRunning = async (userId: string) => {
    const requested = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId, enable_sharing: false });
    expect(requested.status).toBe(200);
    const id = requested.body.workspace_id as string;
    const workspace = await waitFor('the workspace running', async () => {
      const status = await api.call('get_workspace_status', admin, { workspace_id: id, user_id: userId, skip_agent_check: true });
      return status.body.workspace?.operational_status === 'running' ? status.body.workspace : undefined;
    }, 180_000, 250);
    return { id, workspace };
  };

  it('fills the pool with running holders that publish the image\'s ports on loopback', async () => {
    await runtime.fillNetworkPools();
    const free = await poolOf(2);
    for (const holder of free) {
      const info = await localDocker().inspect(holder.container_id, { vnc: '5900/tcp' });
      expect(info.running).toBe(true);
      expect(info.hostPorts.vnc).toBe(holder.host_ports.vnc);
    }
    // The operator sees them in the worker's metrics.
    const exposition = await (api.worker as NonNullable<typeof api.worker>).get(Metrics).exposition();
    expect(exposition).toContain('workspace_server_network_holders{server="local",state="free"} 2');
  });

  it('a launch joins a free holder\'s namespace, runs its desktop there, and the pool refills; destroy removes the holder', async () => {
    const before = new Set((await poolOf(2)).map((r) => r.container_id));
    const user = await createUser('holder-user');
    const { id: workspaceId, workspace: running } = await launchRunning(user);

    const [claimed] = (await rows()).filter((r) => r.workspace_id === parseId(workspaceId));
    expect(before.has(claimed.container_id)).toBe(true);
    // The workspace's container is in the holder's namespace, and its answers give the holder's published port.
    const inspect = await new Docker({ socketPath: '/var/run/docker.sock' }).getContainer(running.container_id as string).inspect();
    expect(inspect.HostConfig.NetworkMode).toBe(`container:${claimed.container_id}`);
    expect(running.port).toBe(claimed.host_ports.vnc);
    // The desktop's own processes see the namespace's network (its VNC server answered there: the launch waited on it).
    const exec = await api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: user, exec_config: { cmd: 'cat /etc/resolv.conf' }, wait: true });
    expect(exec.status).toBe(200);
    expect(exec.body.stdout).toContain('nameserver 127.0.0.11');

    // The claim asked for a refill: two free holders again, the claimed one not among them.
    const refilled = await poolOf(2);
    expect(refilled.map((r) => r.container_id)).not.toContain(claimed.container_id);

    expect((await api.call('destroy_workspace', admin, { workspace_id: workspaceId, user_id: user })).status).toBe(200);
    await waitFor('the holder removed with its workspace', async () => {
      const gone = !(await rows()).some((r) => r.container_id === claimed.container_id);
      const containerGone = !(await api.containers()).some((c) => c.id === claimed.container_id);
      return gone && containerGone ? true : undefined;
    }, 180_000, 250);
  });

  it('a workspace in a holder is as isolated as any: no other workspace, no host service; the host still streams it', async () => {
    await poolOf(2);
    const user = await createUser('holder-iso');
    const launch = async () => {
      const { id, workspace } = await launchRunning(user);
      return { id, ip: workspace.container_ip as string, port: workspace.port as number };
    };
    const [a, b] = await Promise.all([launch(), launch()]);
    expect((await rows()).filter((r) => r.workspace_id !== null).map((r) => r.workspace_id).sort()).toEqual([parseId(a.id), parseId(b.id)].sort());
    const probe = async (from: string, host: string, port: number) =>
      (await api.call('exec_command_workspace', admin, { workspace_id: from, user_id: user, exec_config: { cmd: tcpProbeCommand(host, port) }, wait: true, timeout_seconds: 30 })).body.stdout as string;
    const docker = new Docker({ socketPath: '/var/run/docker.sock' });
    const gateway = (await docker.getNetwork('workspace-server-isolated').inspect()).IPAM?.Config?.[0]?.Gateway as string;
    // Positive controls: A reaches its own VNC server at its address; a container on the default bridge reaches B's.
    expect(await probe(a.id, a.ip, 5900)).toBe('open\nexit=0\n');
    const control = await docker.createContainer({
      Image: desktopImage(), Cmd: ['sleep', '600'], Labels: { 'workspace-server.deployment-id': api.config.DEPLOYMENT_ID },
      HostConfig: { NetworkMode: 'bridge', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'] },
    });
    try {
      await control.start();
      expect((await localDocker().exec(control.id, { cmd: tcpProbeCommand(b.ip, 5900), timeoutMs: 30_000 })).stdout).toBe('open\nexit=0\n');
      // A cannot reach B, B cannot reach A, and A cannot reach the host's PostgreSQL through the gateway.
      expect(await probe(a.id, b.ip, 5900)).not.toContain('open');
      expect(await probe(b.id, a.ip, 5900)).not.toContain('open');
      expect(await probe(a.id, gateway, 5432)).not.toContain('open');
    } finally {
      await control.remove({ force: true });
    }
    // The host streams both through the holders' published loopback ports.
    for (const w of [a, b]) await expect(localDocker().waitForRfb('127.0.0.1', w.port, { timeoutMs: 30_000 })).resolves.toEqual(expect.any(Number));
    for (const w of [a, b]) expect((await api.call('destroy_workspace', admin, { workspace_id: w.id, user_id: user })).status).toBe(200);
    await waitFor('no claimed holder left', async () => ((await rows()).every((r) => r.workspace_id === null) ? true : undefined), 120_000, 250);
  });

  it('the reconciler removes a holder whose claimant is gone and keeps the free ones', async () => {
    const free = await poolOf(2);
    const abandoned = free[0].container_id;
    // A launch that claimed it and died with its workspace (a claim row whose workspace is not live).
    await db.query('UPDATE network_holders SET workspace_id = gen_random_uuid(), claimed_at = now() WHERE container_id = $1', [abandoned]);
    await runtime.reconcile([server.id]);
    expect((await rows()).some((r) => r.container_id === abandoned)).toBe(false);
    expect((await api.containers()).some((c) => c.id === abandoned)).toBe(false);
    expect((await freeHolders()).map((r) => r.container_id)).toContain(free[1].container_id);
  });

  it('a launch that finds the oldest free holder stopped removes it and takes the next', async () => {
    const [stopped, next] = await poolOf(2);
    await localDocker().stop(stopped.container_id, 0);
    const user = await createUser('holder-user-2');
    const { id: workspaceId } = await launchRunning(user);
    const claimed = (await rows()).find((r) => r.workspace_id === parseId(workspaceId));
    expect(claimed?.container_id).toBe(next.container_id);
    expect((await rows()).some((r) => r.container_id === stopped.container_id)).toBe(false);
    expect((await api.containers()).some((c) => c.id === stopped.container_id)).toBe(false);
    expect((await api.call('destroy_workspace', admin, { workspace_id: workspaceId, user_id: user })).status).toBe(200);
  });

  it('a smaller pool size trims the free holders', async () => {
    await poolOf(2);
    // The api's and the worker's settings both (the worker's schedule fills too).
    const configs = [api.app.get(AppConfig), api.worker?.get(AppConfig)].filter((c): c is AppConfig => !!c);
    for (const config of configs) config.NETWORK_POOL_SIZE = 1;
    try {
      await runtime.fillNetworkPools(server.id);
      expect((await freeHolders()).length).toBe(1);
    } finally {
      for (const config of configs) config.NETWORK_POOL_SIZE = 2;
    }
  });

  it('server remove takes the server\'s holders with it', async () => {
    const zone = await api.app.get(ZonesService).ensure('default');
    const other = await api.app.get(ServersService).upsert({ hostname: 'local-2', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 64 * 1024 ** 3 });
    await runtime.fillNetworkPools(other.id);
    const held = await waitFor('the second server\'s holders', async () => {
      const found: Array<{ container_id: string }> = await db.query('SELECT container_id FROM network_holders WHERE server_id = $1', [other.id]);
      return found.length === 2 ? found.map((r) => r.container_id) : undefined;
    }, 60_000, 250);
    await api.app.get(ServerRetirement).remove('local-2');
    expect(await db.query('SELECT 1 FROM network_holders WHERE server_id = $1', [other.id])).toEqual([]);
    const left = new Set((await api.containers()).map((c) => c.id));
    expect(held.filter((id) => left.has(id))).toEqual([]);
    // The first server's pool is untouched.
    expect((await freeHolders()).length).toBeGreaterThan(0);
  });
});
