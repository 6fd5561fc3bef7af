import Docker from 'dockerode';
import supertest from 'supertest';
import { DataSource } from 'typeorm';
import { parseId, randomSecret, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ZonesService } from '@ws/zones';
import { runCli as cli, useApiForCli } from './cli-runner';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';

const uuidOf = (wireId: string) => parseId(wireId) as string;

/**
 * An image's restrict_to_network on a real Docker engine: its containers join the operator's network (and only
 * it); a network missing on the server fails the provision with a clear message; a restriction without a
 * network_name is refused when saved (CLI) and at launch (400 naming the image).
 */
describe('image restrict_to_network', () => {
  let api: TestApi;
  let key: TestKey;
  let admin: TestKey;
  let db: DataSource;
  let restoreEnv: () => Promise<void> = async () => undefined;
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });
  const networkName = `ws-e2e-net-${randomSecret(4).toLowerCase()}`;

  beforeAll(async () => {
    // A bridge of the operator's, publishing only on 127.0.0.1.
    await engine.createNetwork({ Name: networkName, Driver: 'bridge', Options: { 'com.docker.network.bridge.host_binding_ipv4': '127.0.0.1' } });
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    restoreEnv = useApiForCli(api);
    db = api.app.get(DataSource);
    await cli('server', 'ensure-local');
    await cli('image', 'add', desktopImage(), '--friendly-name', 'Networked', '--cores', '1', '--memory', '1G');
    await cli('image', 'add', desktopImage(), '--friendly-name', 'Nowhere', '--cores', '1', '--memory', '1G');
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => {
    await restoreEnv();
    await api?.close(); // removes the deployment's containers, so the network has no endpoints left
    await engine.getNetwork(networkName).remove().catch(() => undefined);
  });

  const newUser = async (username: string): Promise<string> => (await api.call('create_user', admin, { target_user: { username } })).body.user.user_id;
  const imageIdOf = async (friendlyName: string) => (await api.app.get(ImagesService).findByRef(friendlyName)).id.replace(/-/g, '');
  const request = async (userId: string, imageId: string) => {
    const res = await api.call('request_workspace', key, { user_id: userId, image_id: imageId });
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: expect.objectContaining({ workspace_id: expect.any(String) }) });
    return res.body.workspace_id as string;
  };
  const statusOf = async (workspaceId: string): Promise<{ status: string; operational_message: string; container_id: string | null }> =>
    (await db.query('SELECT status, operational_message, container_id FROM workspaces WHERE id = $1', [uuidOf(workspaceId)]))[0];

  it('refuses restrict_to_network without a network_name when the image is saved', async () => {
    await expect(cli('image', 'update', 'Networked', '--restrict-to-network')).rejects.toThrow('Image Networked: restrict_to_network needs a network_name');
    await expect(cli('image', 'update', 'Networked', '--network-name', 'host', '--restrict-to-network')).rejects.toThrow('network_name: host is not a usable Docker network');
    await expect(cli('image', 'update', 'Networked', '--network-name', networkName, '--restrict-to-network', '--selectable-network', 'other'))
      .rejects.toThrow(`restricted to the network ${networkName}; selectable_networks may not list other`);
    expect((await api.app.get(ImagesService).findByRef('Networked')).restrictToNetwork).toBe(false);
  });

  it('puts the container of a restricted image on that network only', async () => {
    await cli('image', 'update', 'Networked', '--network-name', networkName, '--restrict-to-network');
    const userId = await newUser(`net-${randomSecret(3)}`);
    const workspaceId = await request(userId, await imageIdOf('Networked'));
    const row = await waitFor(`workspace ${workspaceId} running`, async () => {
      const current = await statusOf(workspaceId);
      if (current.status === 'failed' || current.status === 'deleted') throw new Error(`workspace ended: ${JSON.stringify(current)}`);
      return current.status === 'running' ? current : undefined;
    }, 180_000, 200);
    const inspected = await engine.getContainer(row.container_id as string).inspect();
    expect(Object.keys(inspected.NetworkSettings.Networks)).toEqual([networkName]);
    const wire = (await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId })).body;
    expect(wire.workspace?.operational_status).toBe('running');
  });

  it('stages the containers of a restricted image on that network too', async () => {
    const zoneId = toWireId((await api.app.get(ZonesService).ensure('default')).id);
    const created = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: await imageIdOf('Networked'), num_sessions: 1, expiration: 1 } });
    expect(created.status).toBe(200);
    const configId = created.body.staging_config.staging_config_id as string;
    const staged = await waitFor('a staged workspace running', async () => {
      const rows: Array<{ status: string; container_id: string | null }> = await db.query(
        `SELECT status, container_id FROM workspaces WHERE staging_config_id = $1 AND status <> 'deleted'`, [uuidOf(configId)],
      );
      if (rows.some((r) => r.status === 'failed')) throw new Error(`a staged workspace failed: ${JSON.stringify(rows)}`);
      return rows.find((r) => r.status === 'running');
    }, 180_000, 250);
    const inspected = await engine.getContainer(staged.container_id as string).inspect();
    expect(Object.keys(inspected.NetworkSettings.Networks)).toEqual([networkName]);
    expect((await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: configId } })).status).toBe(200);
  });

  it('refuses a cast visitor\'s container_network other than the restricted image\'s network (the image wins)', async () => {
    // The image save refuses such a selectable_networks; a row edited by hand still meets the launch's own check.
    await db.query('UPDATE images SET selectable_networks = $1 WHERE friendly_name = $2', [['other-net'], 'Networked']);
    const created = await api.call('create_cast_config', admin, {
      target_cast_config: { casting_config_name: 'Restricted', image_id: await imageIdOf('Networked'), allow_anonymous: true, dynamic_container_network: true },
    });
    expect(created.status).toBe(200);
    const res = await supertest(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json')
      .send({ key: created.body.cast_config.key, container_network: 'other-net' });
    expect({ status: res.status, message: res.body.error_message }).toEqual({ status: 400, message: expect.stringContaining(`is restricted to the network ${networkName}; container_network other-net is not allowed`) });
    await db.query('UPDATE images SET selectable_networks = $1 WHERE friendly_name = $2', [[], 'Networked']);
  });

  it('fails the provision clearly when the network does not exist on the server', async () => {
    const missing = `ws-e2e-missing-${randomSecret(4).toLowerCase()}`;
    await cli('image', 'update', 'Nowhere', '--network-name', missing, '--restrict-to-network');
    const workspaceId = await request(await newUser(`miss-${randomSecret(3)}`), await imageIdOf('Nowhere'));
    const row = await waitFor(`workspace ${workspaceId} failed`, async () => {
      const current = await statusOf(workspaceId);
      return current.status === 'running' ? Promise.reject(new Error('started on a missing network')) : current.status === 'starting' ? undefined : current;
    }, 120_000, 200);
    expect(row.operational_message).toContain(`The Docker network ${missing} does not exist on the server`);
    expect((await engine.listNetworks({ filters: { name: [missing] } })).length).toBe(0); // never created by us
  });

  it('refuses at launch (400 naming the image) a restriction without a network_name (a row edited by hand)', async () => {
    await db.query('UPDATE images SET restrict_to_network = true, network_name = NULL WHERE friendly_name = $1', ['Nowhere']);
    const res = await api.call('request_workspace', key, { user_id: await newUser(`bad-${randomSecret(3)}`), image_id: await imageIdOf('Nowhere') });
    expect({ status: res.status, body: res.body }).toEqual({ status: 400, body: { error_message: expect.stringContaining('Image Nowhere') } });
    expect(res.body.error_message).toContain('is restricted to a network but names none (network_name)');
  });
});
