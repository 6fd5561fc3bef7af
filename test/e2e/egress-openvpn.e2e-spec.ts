/**
 * Egress for real (issue 21), username_password_vpn and custom: against a real OpenVPN gateway of the test's own
 * (egress-gateway.ts: Debian's openvpn in server mode, certificates made by the test, username/password checked by an
 * auth-user-pass-verify script). A workspace that joined the gateway reaches the outside host through the tunnel and
 * is seen there with the gateway's address; one without a gateway does not reach it; the tunnelled one reaches
 * nothing directly; neither `env` nor a file search in its desktop finds the password; a wrong password fails the
 * launch ("authentication refused", naming the gateway) and gives the connection back; with the gateway stopped
 * the tunnelled workspace reaches nothing. A custom gateway runs its command with the credential on standard input
 * (never in its environment), and the workspace is running once the command's interface is up.
 */
import Docker from 'dockerode';
import { DataSource } from 'typeorm';
import { DockerHost, egressSidecarNameFor } from '@ws/agent';
import { parseId, toWireId } from '@ws/common';
import { EgressCatalog } from '@ws/egress';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { desktopImage, egressImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { fetchAddressCommand, OpenVpnTestGateway, startOpenVpnGateway, strangerCa } from './egress-gateway';

const PASSWORD = 'correct horse 42';
const WRONG = 'wrong battery 17';
const CUSTOM_SECRET = 'custom-token-9f3a1c';

describe('egress through a real OpenVPN gateway (username_password_vpn) and a custom command', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  let gw: OpenVpnTestGateway;
  let host: DockerHost;
  let imageId: string;
  let userId: string;
  let wrongUserId: string;
  let gatewayId: string;
  let customGatewayId: string;
  let badConfigGatewayId: string;
  let wrongCaGatewayId: string;
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });

  const row = async (workspaceId: string) =>
    (await db.query('SELECT status, operational_message FROM workspaces WHERE id = $1', [parseId(workspaceId)]))[0] as { status: string; operational_message: string | null };
  const settled = (workspaceId: string) =>
    waitFor(`workspace ${workspaceId} running or failed`, async () => {
      const r = await row(workspaceId);
      return r.status === 'running' || r.status === 'failed' ? r : undefined;
    }, 120_000, 100);
  const launch = async (user: string, gateway?: string) => {
    const res = await api.call('request_workspace', admin, { user_id: user, image_id: imageId, ...(gateway ? { egress_gateway_id: gateway } : {}) });
    expect(res.status).toBe(200);
    return res.body.workspace_id as string;
  };
  const connections = async () => Number((await db.query('SELECT count(*) AS n FROM egress_connections'))[0].n);
  const run = async (workspaceId: string, cmd: string, user = userId) => {
    const res = await api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: user, exec_config: { cmd }, wait: true });
    expect(res.status).toBe(200);
    return (res.body.stdout as string).trim();
  };
  const inSidecar = async (workspaceId: string, cmd: string) =>
    (await host.exec(egressSidecarNameFor(parseId(workspaceId) as string), { cmd, user: 'root', timeoutMs: 10_000 })).stdout.trim();
  const credential = async (fields: Record<string, unknown>) => {
    const res = await api.call('update_egress_credential', admin, { target_egress_credential: { allow_all_gateways: true, ...fields } });
    expect(res.status).toBe(200);
  };
  /** What the desktop's environment and its files hold of a secret (nothing, in the end). */
  const secretTraces = (workspaceId: string, secret: string) =>
    run(workspaceId, `{ env | grep -F -- '${secret}'; timeout 60 grep -rlsF -- '${secret}' /etc /home /tmp /run /var/tmp /opt /root 2>/dev/null; } | head -5; true`);

  beforeAll(async () => {
    gw = await startOpenVpnGateway();
    await gw.addUser('alice', PASSWORD);
    api = await TestApi.start({ WORKER_LOCK_MS: 3000, EGRESS_IMAGE: egressImage() }, { worker: true });
    db = api.app.get(DataSource);
    host = localDocker();
    admin = await api.key(['Global Admin']);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
    imageId = toWireId((await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' },
      restrictToNetwork: true, networkName: gw.networkName,
    })).id);
    userId = (await api.call('create_user', admin, { target_user: { username: 'egress-ovpn' } })).body.user.user_id;
    wrongUserId = (await api.call('create_user', admin, { target_user: { username: 'egress-ovpn-wrong' } })).body.user.user_id;
    const catalog = api.app.get(EgressCatalog);
    const vpn = await catalog.createProvider('corp-ovpn', 'username_password_vpn');
    gatewayId = toWireId((await catalog.createGateway('corp-ovpn', { name: 'ovpn-exit', endpoint: gw.endpoint, config: { ca: gw.ca, verify_x509_name: gw.serverName } })).id);
    badConfigGatewayId = toWireId((await catalog.createGateway('corp-ovpn', { name: 'ovpn-no-ca', endpoint: gw.endpoint, config: { proto: 'udp' } })).id);
    wrongCaGatewayId = toWireId((await catalog.createGateway('corp-ovpn', { name: 'ovpn-wrong-ca', endpoint: gw.endpoint, config: { ca: strangerCa() } })).id);
    await credential({ egress_provider_id: toWireId(vpn.id), name: 'office', username: 'alice', password: PASSWORD, user_id: userId });
    await credential({ egress_provider_id: toWireId(vpn.id), name: 'typo', username: 'alice', password: WRONG, user_id: wrongUserId });
    // custom: the command keeps what it read on standard input and its environment (for the test to look at), then
    // brings up its interface and stays.
    const custom = await catalog.createProvider('homegrown', 'custom');
    const command = ['/bin/bash', '-c', 'cat > /run/egress/custom-stdin; env > /run/egress/custom-env; ip tuntap add dev egr0 mode tun && ip link set egr0 up && exec sleep infinity'];
    customGatewayId = toWireId((await catalog.createGateway('homegrown', { name: 'custom-exit', endpoint: gw.endpoint, config: { command, interface: 'egr0' } })).id);
    await credential({ egress_provider_id: toWireId(custom.id), name: 'token', custom_credential: CUSTOM_SECRET, user_id: userId });
  });
  afterAll(async () => {
    await api?.close(); // removes the deployment's containers (the sidecars among them)
    await gw?.close();
  });

  let tunnelled: string;

  it('a workspace that joined the gateway reaches the outside host through it, seen with the gateway\'s address; its desktop holds no secret', async () => {
    tunnelled = await launch(userId, gatewayId);
    expect(await settled(tunnelled)).toEqual({ status: 'running', operational_message: expect.any(String) });
    expect(await run(tunnelled, fetchAddressCommand(gw.outsideAddress))).toContain(gw.exitAddress);
    // Kill switch: nothing goes out beside the tunnel, not even to the network the sidecar is on.
    expect(await run(tunnelled, fetchAddressCommand(gw.canaryAddress))).toBe('');
    expect((await run(tunnelled, 'env | grep ^EGRESS_ | cut -d= -f1 | sort')).split('\n')).toEqual([
      'EGRESS_GATEWAY_CONFIG', 'EGRESS_GATEWAY_ENDPOINT', 'EGRESS_GATEWAY_ID', 'EGRESS_GATEWAY_NAME', 'EGRESS_PROVIDER_NAME', 'EGRESS_PROVIDER_TYPE', 'EGRESS_USERNAME',
    ]);
    expect(await secretTraces(tunnelled, PASSWORD)).toBe('');
    // The password is the sidecar's only, in a root-only file, and not in its environment.
    expect(await inSidecar(tunnelled, 'stat -c %a /etc/egress/openvpn.auth')).toBe('600');
    const sidecar = await engine.getContainer(egressSidecarNameFor(parseId(tunnelled) as string)).inspect();
    expect(JSON.stringify(sidecar.Config.Env)).not.toContain(PASSWORD);
    expect(JSON.stringify(sidecar.Config.Labels)).not.toContain(PASSWORD);
  });

  it('a workspace without a gateway does not reach the outside host (it reaches its own network)', async () => {
    const direct = await launch(userId);
    expect((await settled(direct)).status).toBe('running');
    expect(await run(direct, fetchAddressCommand(gw.outsideAddress))).toBe('');
    expect(await run(direct, fetchAddressCommand(gw.canaryAddress))).toMatch(/\d+\.\d+\.\d+\.\d+/);
    expect((await api.call('destroy_workspace', admin, { workspace_id: direct, user_id: userId })).status).toBe(200);
  });

  it('a wrong password fails the launch ("authentication refused", naming the gateway), releases the connection and leaves no container', async () => {
    const before = await connections();
    const refused = await launch(wrongUserId, gatewayId);
    expect(await connections()).toBe(before + 1);
    const r = await settled(refused);
    expect(r.status).toBe('failed');
    expect(r.operational_message).toMatch(/egress gateway ovpn-exit could not start: authentication refused/);
    expect(await connections()).toBe(before);
    await waitFor('no container left', async () =>
      ((await engine.listContainers({ all: true, filters: { label: [`workspace-server.workspace-id=${parseId(refused)}`] } })).length === 0 ? true : undefined), 30_000, 200);
  });

  it('a gateway config without a CA, or with a CA the server\'s certificate fails, fails the launch naming the gateway and the reason', async () => {
    const before = await connections();
    const noCa = await launch(userId, badConfigGatewayId);
    const wrongCa = await launch(userId, wrongCaGatewayId);
    expect(await settled(noCa)).toEqual({ status: 'failed', operational_message: expect.stringMatching(/bad configuration of the egress gateway ovpn-no-ca: config.ca is required/) });
    expect(await settled(wrongCa)).toEqual({ status: 'failed', operational_message: expect.stringMatching(/egress gateway ovpn-wrong-ca could not start: the server's certificate does not match the gateway's CA/) });
    expect(await connections()).toBe(before);
  });

  it('custom: the command gets the credential on standard input, not in its environment; the desktop has neither', async () => {
    const workspaceId = await launch(userId, customGatewayId);
    expect(await settled(workspaceId)).toEqual({ status: 'running', operational_message: expect.any(String) });
    expect(JSON.parse(await inSidecar(workspaceId, 'cat /run/egress/custom-stdin'))).toEqual({ custom_credential: CUSTOM_SECRET });
    const env = await inSidecar(workspaceId, 'cat /run/egress/custom-env');
    expect(env).toContain('EGRESS_DEV=egr0');
    expect(env).not.toContain(CUSTOM_SECRET);
    expect(await secretTraces(workspaceId, CUSTOM_SECRET)).toBe('');
    // Its kill switch lets out only its interface (which leads nowhere here) and its endpoint.
    expect(await run(workspaceId, fetchAddressCommand(gw.canaryAddress))).toBe('');
    expect((await api.call('destroy_workspace', admin, { workspace_id: workspaceId, user_id: userId })).status).toBe(200);
  });

  it('with the gateway stopped, the tunnelled workspace reaches nothing (kill switch) and its sidecar says down; destroy removes it', async () => {
    await gw.stop();
    expect(await run(tunnelled, fetchAddressCommand(gw.outsideAddress))).toBe('');
    expect(await run(tunnelled, fetchAddressCommand(gw.canaryAddress))).toBe('');
    // The server's keepalive (ping-restart 10 s) ends the session: OpenVPN's down hook.
    await waitFor('the sidecar says the tunnel is down', async () => ((await inSidecar(tunnelled, 'cat /run/egress/status')) === 'down' ? true : undefined), 60_000, 500);
    expect((await api.call('destroy_workspace', admin, { workspace_id: tunnelled, user_id: userId })).status).toBe(200);
    await waitFor('the workspace deleted', async () => ((await row(tunnelled)).status === 'deleted' ? true : undefined), 60_000, 100);
    expect(await engine.listContainers({ all: true, filters: { label: [`workspace-server.workspace-id=${parseId(tunnelled)}`] } })).toEqual([]);
  });
});
