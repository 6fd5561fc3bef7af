/**
 * Egress for real (issue 21), mesh_network: against a real Nebula gateway of the test's own (egress-gateway.ts:
 * Debian's nebula as lighthouse and exit node, certificates made with nebula-cert). A workspace that joined the
 * gateway reaches the outside host through the mesh and is seen there with the gateway's address; it reaches
 * nothing directly; its desktop holds no mesh key; a key that does not match its certificate fails the launch with
 * a message naming the gateway and gives the connection back; with the gateway stopped it reaches nothing.
 */
import Docker from 'dockerode';
import { DataSource } from 'typeorm';
import { egressSidecarNameFor } from '@ws/agent';
import { parseId, toWireId } from '@ws/common';
import { EgressCatalog } from '@ws/egress';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { desktopImage, egressImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { fetchAddressCommand, NebulaTestGateway, startNebulaGateway } from './egress-gateway';

describe('egress through a real Nebula gateway (mesh_network)', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  let gw: NebulaTestGateway;
  let imageId: string;
  let userId: string;
  let mismatchedUserId: string;
  let gatewayId: string;
  let node: { meshKey: string; cert: string; key: string };
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });

  const row = async (workspaceId: string) =>
    (await db.query('SELECT status, operational_message FROM workspaces WHERE id = $1', [parseId(workspaceId)]))[0] as { status: string; operational_message: string | null };
  const settled = (workspaceId: string) =>
    waitFor(`workspace ${workspaceId} running or failed`, async () => {
      const r = await row(workspaceId);
      return r.status === 'running' || r.status === 'failed' ? r : undefined;
    }, 120_000, 100);
  const launch = async (user: string) => {
    const res = await api.call('request_workspace', admin, { user_id: user, image_id: imageId, egress_gateway_id: gatewayId });
    expect(res.status).toBe(200);
    return res.body.workspace_id as string;
  };
  const connections = async () => Number((await db.query('SELECT count(*) AS n FROM egress_connections'))[0].n);
  const run = async (workspaceId: string, cmd: string) => {
    const res = await api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: userId, exec_config: { cmd }, wait: true });
    expect(res.status).toBe(200);
    return (res.body.stdout as string).trim();
  };

  beforeAll(async () => {
    gw = await startNebulaGateway();
    api = await TestApi.start({ WORKER_LOCK_MS: 3000, EGRESS_IMAGE: egressImage() }, { worker: true });
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
    imageId = toWireId((await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' },
      restrictToNetwork: true, networkName: gw.networkName,
    })).id);
    userId = (await api.call('create_user', admin, { target_user: { username: 'egress-mesh' } })).body.user.user_id;
    mismatchedUserId = (await api.call('create_user', admin, { target_user: { username: 'egress-mesh-other' } })).body.user.user_id;
    const catalog = api.app.get(EgressCatalog);
    const mesh = await catalog.createProvider('mesh', 'mesh_network');
    gatewayId = toWireId((await catalog.createGateway('mesh', { name: 'mesh-exit', endpoint: gw.endpoint, config: { ca: gw.ca, exit_node: gw.exitNode } })).id);
    node = await gw.addNode(2);
    const other = await gw.addNode(3);
    for (const [user, meshKey] of [[userId, node.meshKey], [mismatchedUserId, node.cert + other.key]]) {
      const res = await api.call('update_egress_credential', admin, {
        target_egress_credential: { egress_provider_id: toWireId(mesh.id), name: 'node', mesh_key: meshKey, allow_all_gateways: true, user_id: user },
      });
      expect(res.status).toBe(200);
    }
  });
  afterAll(async () => {
    await api?.close();
    await gw?.close();
  });

  let tunnelled: string;

  it('a workspace that joined the gateway reaches the outside host through the mesh, seen with the gateway\'s address; its desktop holds no key', async () => {
    tunnelled = await launch(userId);
    expect(await settled(tunnelled)).toEqual({ status: 'running', operational_message: expect.any(String) });
    expect(await run(tunnelled, fetchAddressCommand(gw.outsideAddress))).toContain(gw.exitAddress);
    expect(await run(tunnelled, fetchAddressCommand(gw.canaryAddress))).toBe('');
    expect((await run(tunnelled, 'env | grep ^EGRESS_ | cut -d= -f1 | sort')).split('\n')).toEqual([
      'EGRESS_GATEWAY_CONFIG', 'EGRESS_GATEWAY_ENDPOINT', 'EGRESS_GATEWAY_ID', 'EGRESS_GATEWAY_NAME', 'EGRESS_PROVIDER_NAME', 'EGRESS_PROVIDER_TYPE',
    ]);
    const keyLine = node.key.split('\n')[1];
    expect(await run(tunnelled, `{ env | grep -F -- '${keyLine}'; timeout 60 grep -rlsF -- '${keyLine}' /etc /home /tmp /run /var/tmp /opt /root 2>/dev/null; } | head -5; true`)).toBe('');
    const sidecar = await engine.getContainer(egressSidecarNameFor(parseId(tunnelled) as string)).inspect();
    expect(JSON.stringify(sidecar.Config.Env)).not.toContain(keyLine);
  });

  it('a mesh key that does not match its certificate fails the launch with a message naming the gateway and releases the connection', async () => {
    const before = await connections();
    const refused = await launch(mismatchedUserId);
    const r = await settled(refused);
    expect(r.status).toBe('failed');
    expect(r.operational_message).toMatch(/egress gateway mesh-exit could not start: bad configuration: the mesh key does not match the node's certificate/);
    expect(await connections()).toBe(before);
  });

  it('with the gateway stopped, the tunnelled workspace reaches nothing (kill switch) and its sidecar says down; destroy removes it', async () => {
    await gw.stop();
    expect(await run(tunnelled, fetchAddressCommand(gw.outsideAddress))).toBe('');
    expect(await run(tunnelled, fetchAddressCommand(gw.canaryAddress))).toBe('');
    // Nebula's connection manager declares the tunnel dead once traffic gets no answer (its log: "Tunnel status").
    await waitFor('the sidecar says the tunnel is down', async () => {
      await run(tunnelled, fetchAddressCommand(gw.outsideAddress));
      return (await localDocker().exec(egressSidecarNameFor(parseId(tunnelled) as string), { cmd: 'cat /run/egress/status', user: 'root' })).stdout.trim() === 'down' ? true : undefined;
    }, 90_000, 500);
    expect((await api.call('destroy_workspace', admin, { workspace_id: tunnelled, user_id: userId })).status).toBe(200);
    await waitFor('the workspace deleted', async () => ((await row(tunnelled)).status === 'deleted' ? true : undefined), 60_000, 100);
    expect(await engine.listContainers({ all: true, filters: { label: [`workspace-server.workspace-id=${parseId(tunnelled)}`] } })).toEqual([]);
  });
});
