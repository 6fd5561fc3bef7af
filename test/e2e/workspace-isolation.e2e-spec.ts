import { execFileSync } from 'node:child_process';
import { createServer, Server as NetServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { DockerHost, ensureWorkspaceNetwork, LABELS, WORKSPACE_NETWORK } from '@ws/agent';
import { randomSecret } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { desktopImage, localDocker, tcpProbeCommand, TestApi, TestKey, waitFor } from './harness';

/**
 * Workspaces are hardened and isolated, on the real engine with the reference image: no-new-privileges, no
 * setuid files, and no connection from a workspace to another workspace or to the host's services (the host
 * firewall of scripts/workspace-firewall.sh, installed by ensure-docker.sh, with the agent's isolated network).
 * Every refusal has a positive control from a place that may connect, so a probe that cannot connect at all
 * fails the test. Probes are bash /dev/tcp connects bounded by `timeout` inside the containers.
 */
describe('workspace isolation', () => {
  let api: TestApi;
  let admin: TestKey;
  let imageId: string;
  let userId: string;
  let listener: NetServer;
  let listenerPort: number;
  const docker: DockerHost = localDocker();

  beforeAll(async () => {
    // What npm start and npm test run: the engine and the host firewall this test is about.
    execFileSync('bash', ['scripts/ensure-docker.sh'], { cwd: `${__dirname}/../..`, stdio: ['ignore', 'ignore', 'inherit'], timeout: 120_000 });
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 4, memory: 8 * 1024 ** 3 });
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
    imageId = image.id.replace(/-/g, '');
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: `iso-${randomSecret(4)}` } })).body.user.user_id;
    // A host service listening on every address, as a careless one would: workspaces must still not reach it.
    // A probe hangs up at once, so the reply may meet a reset: that is the prober's business, not an error here.
    listener = createServer((socket) => socket.on('error', () => undefined).end('host-service\n'));
    await new Promise<void>((resolve, reject) => listener.once('error', reject).listen(0, '0.0.0.0', () => resolve()));
    listenerPort = (listener.address() as { port: number }).port;
  }, 180_000);

  afterAll(async () => {
    await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
    await api?.close();
  });

  const exec = (workspaceId: string, cmd: string, user?: 'root') =>
    api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: userId, exec_config: { cmd, ...(user ? { user } : {}) }, wait: true, timeout_seconds: 30 });

  /** "open" when a TCP connection to host:port succeeds within 5 s, else bash's reason (refused, no route, timeout). */
  const probeCommand = tcpProbeCommand;
  const probeFrom = async (workspaceId: string, host: string, port: number) => {
    const res = await exec(workspaceId, probeCommand(host, port));
    expect(res.status).toBe(200);
    return res.body.stdout as string;
  };

  async function requestRunning(): Promise<{ workspaceId: string; containerId: string; ip: string; port: number }> {
    const requested = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId });
    expect(requested.status).toBe(200);
    const workspaceId = requested.body.workspace_id as string;
    const w = await waitFor(`workspace ${workspaceId} running`, async () => {
      const res = await api.call('get_workspace_status', admin, { workspace_id: workspaceId, user_id: userId });
      if (res.body.workspace?.operational_status === 'running') return res.body.workspace;
      if (res.body.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(res.body)}`);
      return undefined;
    }, 180_000, 200);
    return { workspaceId, containerId: w.container_id, ip: w.container_ip, port: w.port };
  }

  it('two workspaces cannot reach each other or the host; the host still streams them', async () => {
    const [a, b] = await Promise.all([requestRunning(), requestRunning()]);

    // Both joined the isolated network; their ports are published on loopback only.
    for (const w of [a, b]) {
      const raw = await docker.docker.getContainer(w.containerId).inspect();
      expect(Object.keys(raw.NetworkSettings.Networks)).toEqual([WORKSPACE_NETWORK.name]);
      expect(raw.HostConfig.NetworkMode).toBe(WORKSPACE_NETWORK.name);
      expect(raw.HostConfig.PortBindings).toEqual({ '5900/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] });
    }
    const network = await docker.docker.getNetwork(WORKSPACE_NETWORK.name).inspect();
    const gateway = network.IPAM?.Config?.[0]?.Gateway as string;
    expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(a.ip).not.toBe(b.ip);

    // Positive control: A's probe connects to A's own VNC server over its network address.
    expect(await probeFrom(a.workspaceId, a.ip, 5900)).toBe('open\nexit=0\n');
    // Positive control: a container on Docker's default bridge reaches B's VNC port and the host listener, so
    // both listen and are routable; what stops A below is the isolation.
    const control = await docker.docker.createContainer({
      Image: desktopImage(), Cmd: ['sleep', '600'], Labels: { [LABELS.deploymentId]: api.config.DEPLOYMENT_ID },
      HostConfig: { NetworkMode: 'bridge', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'] },
    });
    await control.start();
    const bridgeGateway = (await control.inspect()).NetworkSettings.Networks.bridge.Gateway;
    const controlProbe = async (host: string, port: number) => (await docker.exec(control.id, { cmd: probeCommand(host, port), timeoutMs: 30_000 })).stdout;
    expect(await controlProbe(b.ip, 5900)).toBe('open\nexit=0\n');
    expect(await controlProbe(bridgeGateway, listenerPort)).toBe('open\nexit=0\n');

    // A cannot open a connection to B's VNC server, nor B to A's.
    expect(await probeFrom(a.workspaceId, b.ip, 5900)).not.toContain('open');
    expect(await probeFrom(b.workspaceId, a.ip, 5900)).not.toContain('open');

    // A cannot reach the host's service on any of the host's addresses: its gateway, docker0, the uplink.
    const hostAddresses = Object.values(networkInterfaces()).flat().filter((i) => i && i.family === 'IPv4' && !i.internal).map((i) => i!.address);
    expect(hostAddresses).toContain(gateway);
    for (const address of new Set([gateway, ...hostAddresses])) {
      expect({ address, result: await probeFrom(a.workspaceId, address, listenerPort) }).toEqual({ address, result: expect.not.stringContaining('open') });
    }
    // Nor the host's PostgreSQL and Redis ports through the gateway (they listen on loopback here; the rule covers them anywhere).
    for (const port of [5432, 6379]) expect(await probeFrom(a.workspaceId, gateway, port)).not.toContain('open');

    // The host still reaches both desktops on their published loopback ports (the stream gateway's path).
    for (const w of [a, b]) await expect(docker.waitForRfb('127.0.0.1', w.port, { timeoutMs: 30_000 })).resolves.toEqual(expect.any(Number));

    // Destroy removes the containers; the shared network stays for the next workspace, with none of ours on it.
    for (const w of [a, b]) expect((await api.call('destroy_workspace', admin, { workspace_id: w.workspaceId, user_id: userId })).status).toBe(200);
    await waitFor('both containers removed', async () => {
      const left = (await api.containers()).filter((c) => c.id !== control.id);
      return left.length === 0 ? true : undefined;
    }, 60_000, 200);
    const after = await docker.docker.getNetwork(WORKSPACE_NETWORK.name).inspect();
    expect(Object.keys(after.Containers ?? {})).not.toEqual(expect.arrayContaining([a.containerId]));
    expect(Object.keys(after.Containers ?? {})).not.toEqual(expect.arrayContaining([b.containerId]));
  }, 400_000);

  it('no-new-privileges is on, the image has no setuid or setgid files, and root exec is still uid 0', async () => {
    const w = await requestRunning();
    const raw = await docker.docker.getContainer(w.containerId).inspect();
    expect(raw.HostConfig.SecurityOpt).toEqual(['no-new-privileges:true']);

    const user = await exec(w.workspaceId, 'id -u; grep NoNewPrivs /proc/self/status; grep NoNewPrivs /proc/1/status');
    expect(user.body).toMatchObject({ exit_code: 0, stdout: '1000\nNoNewPrivs:\t1\nNoNewPrivs:\t1\n' });
    const setid = await exec(w.workspaceId, 'find / -xdev -perm /6000 2>/dev/null; echo done');
    expect(setid.body).toMatchObject({ exit_code: 0, stdout: 'done\n' });
    // Positive control for that find: it does list files by permission bits (the sticky /tmp).
    expect((await exec(w.workspaceId, 'find / -xdev -maxdepth 1 -perm /1000 2>/dev/null')).body.stdout).toBe('/tmp\n');

    const root = await exec(w.workspaceId, 'id -u; grep NoNewPrivs /proc/self/status; echo ok > /etc/isolation-e2e && cat /etc/isolation-e2e', 'root');
    expect(root.body).toMatchObject({ exit_code: 0, stdout: '0\nNoNewPrivs:\t1\nok\n' });
    // The sandboxed user cannot do what root did.
    expect((await exec(w.workspaceId, 'echo no > /etc/isolation-e2e')).body.exit_code).not.toBe(0);

    expect((await api.call('destroy_workspace', admin, { workspace_id: w.workspaceId, user_id: userId })).status).toBe(200);
  }, 300_000);

  it('ensuring the network is idempotent, also from several agents at once', async () => {
    const hosts = [0, 1, 2].map(() => localDocker());
    const ids = await Promise.all(hosts.map((h) => ensureWorkspaceNetwork(h)));
    expect(new Set(ids).size).toBe(1);
    expect(await ensureWorkspaceNetwork(docker)).toBe(ids[0]);
    const matching = await docker.docker.listNetworks({ filters: { name: [WORKSPACE_NETWORK.name] } });
    expect(matching.filter((n) => n.Name === WORKSPACE_NETWORK.name).map((n) => n.Id)).toEqual([ids[0]]);
  });
});
