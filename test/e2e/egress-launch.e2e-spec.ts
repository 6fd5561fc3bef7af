/**
 * request_workspace with egress_gateway_id: the launch's check (unknown gateway, no usable credential), the
 * credential's connection limit under concurrent launches, the container's EGRESS_* configuration on a real
 * desktop (behind the test's WireGuard gateway: every provider type runs in a sidecar), and the release of the connection when the workspace is destroyed, also after the worker running the
 * destroy was SIGKILLed.
 */
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { newId, parseId, randomSecret, toWireId } from '@ws/common';
import { EgressCatalog, EgressConnection, EgressGateway, EgressProvider } from '@ws/egress';
import { ImagesService } from '@ws/images';
import { jobId, QUEUES } from '@ws/queue';
import { ServersService } from '@ws/servers';
import { WorkspaceRuntime } from '@ws/workspaces';
import { ZonesService } from '@ws/zones';
import { desktopImage, egressImage, TestApi, TestKey, waitFor } from './harness';
import { EgressTestGateway, startEgressGateway } from './egress-gateway';
import { WorkerProcess } from './worker-processes';

/** Egress secrets are stored only encrypted (issue 21): the api and the workers share this key. */
const CREDENTIALS_KEY = 'egress-launch-e2e-key-0123456789abcdef';

/** Providers, gateways and the helpers both suites use. */
async function egressFixture(api: TestApi) {
  const catalog = api.app.get(EgressCatalog);
  const vpn = await catalog.createProvider('corp-vpn', 'username_password_vpn');
  const mesh = await catalog.createProvider('mesh', 'mesh_network');
  const gwA = await catalog.createGateway('corp-vpn', { name: 'gw-a', endpoint: 'vpn-a.example.com:1194', config: { proto: 'udp', port: 1194 } });
  const gwB = await catalog.createGateway('corp-vpn', { name: 'gw-b', endpoint: 'vpn-b.example.com:1194' });
  const exit = await catalog.createGateway('mesh', { name: 'exit-1', endpoint: 'mesh.example.com' });
  return { vpn, mesh, gwA, gwB, exit };
}

describe('egress at launch (no containers)', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  let vpn: EgressProvider;
  let gwA: EgressGateway;
  let gwB: EgressGateway;
  let exit: EgressGateway;
  let imageId: string;
  let plainImageId: string;
  let groupId: string;

  const credential = async (fields: Record<string, unknown>) => {
    const res = await api.call('update_egress_credential', admin, {
      target_egress_credential: { egress_provider_id: toWireId(vpn.id), name: `cred-${randomSecret(3)}`, username: 'alice', password: 'pa55word', allow_all_gateways: true, ...fields },
    });
    expect(res.status).toBe(200);
    return res.body.egress_credentials[0] as { egress_credential_id: string; active_connections: number };
  };
  /** The live active_connections of a credential, as update_egress_credential answers it. */
  const activeConnections = async (credentialId: string) =>
    (await api.call('update_egress_credential', admin, { target_egress_credential: { egress_credential_id: credentialId } })).body.egress_credentials[0].active_connections as number;
  const newUser = async (inGroup = false) => {
    const id = (await api.call('create_user', admin, { target_user: { username: `egress-${randomSecret(4)}` } })).body.user.user_id as string;
    if (inGroup) await db.query('INSERT INTO user_groups (user_id, group_id) VALUES ($1, $2)', [parseId(id), parseId(groupId)]);
    return id;
  };
  const launch = (userId: string | undefined, gateway: string, image = imageId) =>
    api.call('request_workspace', admin, { ...(userId ? { user_id: userId } : {}), image_id: image, egress_gateway_id: gateway });
  const counts = async () => {
    const [row] = await db.query(`SELECT (SELECT count(*) FROM workspaces)::int AS workspaces, (SELECT count(*) FROM egress_connections)::int AS connections, (SELECT count(*) FROM users)::int AS users`);
    return row as { workspaces: number; connections: number; users: number };
  };
  const connectionOf = async (workspaceId: string) => db.getRepository(EgressConnection).findOneBy({ workspaceId: parseId(workspaceId) as string });

  beforeAll(async () => {
    // More connections than the concurrent launches, so all of them are in flight at once.
    api = await TestApi.start({ DATABASE_POOL_SIZE: 14, SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY });
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
    ({ vpn, gwA, gwB, exit } = await egressFixture(api));
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'egress-host', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 256, memory: 1024 * 1024 ** 3 });
    const images = api.app.get(ImagesService);
    imageId = toWireId((await images.upsert({ name: 'example/desktop:1', friendlyName: 'Egress desktop', cores: 1, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    plainImageId = toWireId((await images.upsert({ name: 'example/desktop:1', friendlyName: 'Plain desktop', cores: 1, memory: 256 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    groupId = newId();
    await db.query('INSERT INTO groups (id, name) VALUES ($1, $2)', [groupId, 'egress-team']);
    groupId = toWireId(groupId);
  });
  afterAll(async () => api?.close());

  it('refuses before recording anything: an unknown gateway (400), no usable credential (403)', async () => {
    const userId = await newUser();
    const other = await newUser();
    await credential({ user_id: other }); // someone else's
    await credential({ user_id: userId, enabled: false });
    await credential({ user_id: userId, allow_all_gateways: false, selected_gateways: [toWireId(gwB.id)] });
    const before = await counts();

    const unknown = toWireId(newId());
    for (const gateway of [unknown, 'gw-a']) {
      const res = await launch(userId, gateway);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error_message: `Invalid egress_gateway_id (${gateway})` });
    }
    const forbidden = `No enabled egress credential of the provider corp-vpn allows the gateway gw-a for this user, their groups or the image`;
    const refused = await launch(userId, toWireId(gwA.id));
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error_message: forbidden });
    // A credential of another provider does not open this one's gateways, nor this one's the other's.
    const mesh = await launch(userId, toWireId(exit.id));
    expect(mesh.status).toBe(403);
    expect(mesh.body.error_message).toBe('No enabled egress credential of the provider mesh allows the gateway exit-1 for this user, their groups or the image');
    // An anonymous launch (no user_id) made for nothing leaves no user behind.
    expect((await launch(undefined, toWireId(gwA.id))).status).toBe(403);
    expect(await counts()).toEqual(before);
  });

  it('uses the user\'s own credential, else a group\'s, else the image\'s, and records the connection with the workspace', async () => {
    const image = await credential({ image_id: imageId });
    const group = await credential({ group_id: groupId, allow_all_gateways: false, selected_gateways: [toWireId(gwA.id)] });
    const member = await newUser(true);
    const own = await credential({ user_id: member });

    const first = await launch(member, toWireId(gwA.id));
    expect(first.status).toBe(200);
    expect(await connectionOf(first.body.workspace_id)).toEqual(expect.objectContaining({ credentialId: parseId(own.egress_credential_id), gatewayId: gwA.id }));
    const [row] = await db.query('SELECT launch_options FROM workspaces WHERE id = $1', [parseId(first.body.workspace_id)]);
    expect(row.launch_options.egressGatewayId).toBe(gwA.id);

    // The group's credential allows gw-a only; for gw-b the image's applies.
    const stranger = await newUser(true);
    const viaGroup = await launch(stranger, toWireId(gwA.id));
    expect((await connectionOf(viaGroup.body.workspace_id))?.credentialId).toBe(parseId(group.egress_credential_id));
    const viaImage = await launch(stranger, toWireId(gwB.id));
    expect((await connectionOf(viaImage.body.workspace_id))?.credentialId).toBe(parseId(image.egress_credential_id));
    // Without a credential on it, another image's launch is refused for a user outside the group.
    expect((await launch(await newUser(), toWireId(gwB.id), plainImageId)).status).toBe(403);
    expect(await activeConnections(own.egress_credential_id)).toBe(1);
    expect(await activeConnections(group.egress_credential_id)).toBe(1);
    expect(await activeConnections(image.egress_credential_id)).toBe(1);
  });

  it('holds the credential\'s active connection limit under 10 concurrent launches; a destroy releases it (idempotent)', async () => {
    // The plain image has no credential of its own (the egress image's, unlimited, would serve the rest).
    const userId = await newUser();
    const limited = await credential({ user_id: userId, limit_active_connections: true, active_connection_limit: 3 });
    const answers = await Promise.all(Array.from({ length: 10 }, () => launch(userId, toWireId(gwA.id), plainImageId)));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(3);
    for (const a of answers.filter((x) => x.status !== 200)) {
      expect(a.status).toBe(409);
      expect(a.body.error_message).toMatch(/^Egress connection limit reached for the gateway gw-a \(cred-\w+: 3 of 3\)$/);
    }
    expect(await activeConnections(limited.egress_credential_id)).toBe(3);
    expect(Number((await db.query(`SELECT count(*) AS n FROM workspaces WHERE user_id = $1 AND status <> 'deleted'`, [parseId(userId)]))[0].n)).toBe(3);

    // destroy_workspace marks it stopping; the connection is held until the removal is done (the worker's step).
    const [gone] = ok.map((a) => a.body.workspace_id as string);
    expect((await api.call('destroy_workspace', admin, { workspace_id: gone, user_id: userId })).status).toBe(200);
    expect(await activeConnections(limited.egress_credential_id)).toBe(3);
    const runtime = api.app.get(WorkspaceRuntime);
    await runtime.destroy(parseId(gone) as string);
    expect(await connectionOf(gone)).toBeNull();
    expect(await activeConnections(limited.egress_credential_id)).toBe(2);
    await runtime.destroy(parseId(gone) as string); // a retried destroy: nothing more to release
    expect(await activeConnections(limited.egress_credential_id)).toBe(2);
    // The freed connection is usable again, and only it.
    expect((await launch(userId, toWireId(gwA.id), plainImageId)).status).toBe(200);
    expect((await launch(userId, toWireId(gwA.id), plainImageId)).status).toBe(409);
  });
});

describe('egress at launch on a real desktop', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  // Every provider type runs in a sidecar (issue 21) and needs a real gateway to reach `running`: the test's WireGuard
  // one (egress-gateway.ts; the tunnel itself is egress-tunnel's subject).
  let gw: EgressTestGateway;
  let exit: EgressGateway;
  let imageId: string;
  let userId: string;
  let credentialId: string;
  let privateKey: string;
  let redis: Redis;
  let queue: Queue;
  const workers: WorkerProcess[] = [];

  const status = async (workspaceId: string) => {
    const [row] = await db.query('SELECT status FROM workspaces WHERE id = $1', [parseId(workspaceId)]);
    return (row as { status: string } | undefined)?.status;
  };
  const running = (workspaceId: string) =>
    waitFor(`workspace ${workspaceId} running`, async () => {
      const s = await status(workspaceId);
      if (s === 'failed') throw new Error(`workspace failed: ${JSON.stringify(await db.query('SELECT operational_message FROM workspaces WHERE id = $1', [parseId(workspaceId)]))}`);
      return s === 'running' ? true : undefined;
    }, 120_000, 100);
  const deleted = (workspaceId: string) => waitFor(`workspace ${workspaceId} deleted`, async () => ((await status(workspaceId)) === 'deleted' ? true : undefined), 120_000, 100);
  const connections = async () => Number((await db.query('SELECT count(*) AS n FROM egress_connections WHERE credential_id = $1', [parseId(credentialId)]))[0].n);

  beforeAll(async () => {
    gw = await startEgressGateway();
    api = await TestApi.start({ WORKER_LOCK_MS: 3000, EGRESS_IMAGE: egressImage(), SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY }, { worker: true });
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
    const catalog = api.app.get(EgressCatalog);
    const wg = await catalog.createProvider('wg-corp', 'key_pair_tunnel');
    const peer = await gw.addPeer(2);
    exit = await catalog.createGateway('wg-corp', { name: 'wg-exit', endpoint: gw.endpoint, config: { public_key: gw.publicKey, address: peer.address } });
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
    imageId = toWireId((await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' },
      restrictToNetwork: true, networkName: gw.networkName,
    })).id);
    userId = (await api.call('create_user', admin, { target_user: { username: 'egress-desktop' } })).body.user.user_id;
    privateKey = peer.privateKey;
    const res = await api.call('update_egress_credential', admin, {
      target_egress_credential: { egress_provider_id: toWireId(wg.id), name: 'office', vpn_private_key: privateKey, allow_all_gateways: true, user_id: userId },
    });
    credentialId = res.body.egress_credentials[0].egress_credential_id;
    // Stored encrypted (issue 21); the sidecar below still gets the key in clear.
    const [stored] = await db.query('SELECT vpn_private_key FROM egress_credentials WHERE id = $1', [parseId(credentialId)]);
    expect(stored.vpn_private_key).toMatch(/^v1:/);
    expect(stored.vpn_private_key).not.toContain(privateKey);
    redis = new Redis(api.config.REDIS_URL, { maxRetriesPerRequest: null });
    queue = new Queue(QUEUES.workspaces, { connection: redis, prefix: api.config.REDIS_PREFIX });
  });
  afterAll(async () => {
    for (const w of workers) await w.kill('SIGKILL').catch(() => undefined);
    await queue?.close();
    await redis?.quit();
    await api?.close();
    await gw?.close();
  });

  it('the container gets the gateway as EGRESS_* variables, no secret (over the request\'s own of those names); destroy releases the connection', async () => {
    const res = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId, egress_gateway_id: toWireId(exit.id), environment: { EGRESS_GATEWAY_NAME: 'mallory', GREETING: 'hi' } });
    expect(res.status).toBe(200);
    const workspaceId = res.body.workspace_id as string;
    await running(workspaceId);
    expect(await connections()).toBe(1);
    const exec = await api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: userId, exec_config: { cmd: 'env | grep -E "^(EGRESS_|GREETING=)" | sort' }, wait: true });
    expect(exec.status).toBe(200);
    expect(exec.body.stdout.trim().split('\n')).toEqual([
      `EGRESS_GATEWAY_CONFIG=${JSON.stringify(exit.config)}`,
      `EGRESS_GATEWAY_ENDPOINT=${gw.endpoint}`,
      `EGRESS_GATEWAY_ID=${toWireId(exit.id)}`,
      'EGRESS_GATEWAY_NAME=wg-exit',
      'EGRESS_PROVIDER_NAME=wg-corp',
      'EGRESS_PROVIDER_TYPE=key_pair_tunnel',
      'GREETING=hi',
    ]);
    // The secret is the container's only: not in the workspace's stored request environment.
    const [row] = await db.query('SELECT environment FROM workspaces WHERE id = $1', [parseId(workspaceId)]);
    expect(JSON.stringify(row.environment)).not.toContain(privateKey);

    expect((await api.call('destroy_workspace', admin, { workspace_id: workspaceId, user_id: userId })).status).toBe(200);
    await deleted(workspaceId);
    expect(await connections()).toBe(0);
  });

  it('a worker SIGKILLed while it runs the destroy: the next worker finishes it and the connection is released', async () => {
    const res = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId, egress_gateway_id: toWireId(exit.id) });
    const workspaceId = res.body.workspace_id as string;
    const id = parseId(workspaceId) as string;
    await running(workspaceId);
    expect(await connections()).toBe(1);

    // The destroy goes to a worker process of its own. The test holds the connection's row locked, so that worker
    // removes the container and then waits at its last step (the deleted transition, whose transaction releases
    // the connection first): it is killed there, mid-way, every time.
    await api.stopWorker();
    const doomed = WorkerProcess.spawn(api.settings);
    workers.push(doomed);
    await doomed.ready();
    const holder = db.createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      expect(await holder.query('SELECT workspace_id FROM egress_connections WHERE workspace_id = $1 FOR UPDATE', [id])).toHaveLength(1);
      expect((await api.call('destroy_workspace', admin, { workspace_id: workspaceId, user_id: userId })).status).toBe(200);
      await waitFor('the doomed worker to hold the destroy and remove the container', async () => {
        const job = await queue.getJob(jobId.destroy(id));
        const held = !!job?.processedBy && Number(job.processedBy.split(':').pop()) === doomed.pid && (await job.getState()) === 'active';
        return held && (await api.containers()).length === 0 ? true : undefined;
      }, 60_000, 50);
      await doomed.kill('SIGKILL');
    } finally {
      await holder.rollbackTransaction().catch(() => undefined);
      await holder.release();
    }
    // Killed mid-way: the container is gone, the row still stopping, the connection still held.
    expect(await status(workspaceId)).toBe('stopping');
    expect(await connections()).toBe(1);

    await api.startWorker();
    await deleted(workspaceId);
    expect(await connections()).toBe(0);
    expect(await api.containers()).toEqual([]);
  });
});
