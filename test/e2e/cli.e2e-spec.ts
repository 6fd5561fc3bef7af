import { DataSource } from 'typeorm';
import { Image } from '@ws/images';
import { runCli as cli, useApiForCli } from './cli-runner';
import { insertWorkspaceRow } from './fixtures';
import { TestApi, waitFor } from './harness';


describe('operator CLI', () => {
  let api: TestApi;
  let restoreEnv: () => Promise<void> = async () => undefined;

  beforeAll(async () => {
    api = await TestApi.start();
    // The CLI reads its configuration from the environment, like the api.
    restoreEnv = useApiForCli(api);
  });
  afterAll(async () => {
    await restoreEnv();
    await api?.close();
  });

  it('api-key create --json prints a working key with exactly the granted permissions', async () => {
    const created = JSON.parse(await cli('api-key', 'create', '--name', 'backend', '--permission', 'Users View', '--json'));
    expect(Object.keys(created)).toEqual(['api_key', 'api_key_secret']);
    expect((await api.call('get_users', created)).status).toBe(200);
    expect((await api.call('create_user', created, { target_user: { username: 'x' } })).status).toBe(403);
    expect(await cli('api-key', 'list')).toContain(`api_key=${created.api_key}  name=backend`);
    await cli('api-key', 'revoke', created.api_key);
    // The CLI is another process: its revocation reaches this api as a PostgreSQL notice, milliseconds later.
    await waitFor('the revocation notice', async () => ((await api.call('get_users', created)).status === 401 ? true : undefined), 10_000, 20);
  });

  it('refuses a grant without its dependencies, naming them', async () => {
    await expect(cli('api-key', 'create', '--name', 'x', '--permission', 'Users Delete')).rejects.toThrow('also need: Users Modify, Users View');
  });

  it('--read-only and --expires are applied', async () => {
    const ro = JSON.parse(await cli('api-key', 'create', '--name', 'ro', '--permission', 'Global Admin', '--read-only', '--json'));
    expect((await api.call('get_users', ro)).status).toBe(200);
    expect((await api.call('create_user', ro, { target_user: { username: 'y' } })).status).toBe(403);
    const expired = JSON.parse(await cli('api-key', 'create', '--name', 'old', '--permission', 'Global Admin', '--expires', '2020-01-01T00:00:00Z', '--json'));
    expect((await api.call('get_users', expired)).status).toBe(401);
  });

  it('sets global settings and group settings, refusing bad values', async () => {
    await cli('settings', 'set', 'session_lifetime', '600');
    expect(await cli('settings', 'list')).toContain('session_lifetime: 600');
    await expect(cli('settings', 'set', 'same_site_cookie_policy', 'Sometimes')).rejects.toThrow('must be one of Strict, Lax, None');
    expect(await cli('group', 'set', 'All Users', '--keepalive-expiration', '900', '--usage-limit', '7200', '--usage-interval', 'daily')).toContain('keepalive_expiration=900 usage_limit=7200 usage_interval=daily');
    await expect(cli('group', 'set', 'All Users', '--client-setting', 'bogus=true')).rejects.toThrow('Unknown client setting bogus');
  });

  it('adds zones, servers (capacity given) and images, and lists them', async () => {
    await cli('zone', 'add', 'eu-west');
    const server = JSON.parse(await cli('server', 'add', 'docker-2', '--endpoint', 'tcp://127.0.0.1:2376', '--zone', 'eu-west', '--cores', '8', '--memory', '16G', '--json'));
    expect(server).toEqual(expect.objectContaining({ hostname: 'docker-2', zone: 'eu-west', cores: 8, memory: 16 * 1024 ** 3, enabled: true }));
    await cli('image', 'add', 'example/office:1', '--friendly-name', 'Office', '--cores', '2', '--memory', '4G', '--port', 'vnc=5901/tcp', '--zone', 'eu-west');
    const key = JSON.parse(await cli('api-key', 'create', '--name', 'images', '--permission', 'Images View', '--json'));
    const image = (await api.call('get_images', key)).body.images.find((i: { friendly_name: string }) => i.friendly_name === 'Office');
    expect(image).toEqual(expect.objectContaining({
      name: 'example/office:1', cores: 2, memory: 4 * 1024 ** 3, restrict_to_zone: true, zone_name: 'eu-west',
      imageAttributes: [expect.objectContaining({ category: 'port_map', name: 'vnc', value: '5901/tcp' })],
    }));
    await expect(cli('image', 'add', 'x', '--friendly-name', 'Bad', '--port', 'vnc=99999/tcp')).rejects.toThrow('Invalid port map entry');
    await cli('server', 'remove', 'docker-2');
    expect(await cli('server', 'list')).not.toContain('docker-2');
  });

  it('image remove: an unused image goes; one that workspaces used is disabled instead, with a clear message (issue 19)', async () => {
    await cli('image', 'add', 'example/unused:1', '--friendly-name', 'Unused');
    expect(await cli('image', 'remove', 'Unused')).toBe('removed image Unused');
    const db = api.app.get(DataSource);
    expect(await db.getRepository(Image).countBy({ friendlyName: 'Unused' })).toBe(0);

    const user = await api.call('create_user', JSON.parse(await cli('api-key', 'create', '--name', 'users', '--permission', 'Global Admin', '--json')), { target_user: { username: 'image-history' } });
    const used = await insertWorkspaceRow(db, user.body.user.user_id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'), 'deleted');
    const name = (await db.getRepository(Image).findOneByOrFail({ id: used.imageId })).friendlyName;
    expect(await cli('image', 'remove', name)).toBe(`disabled image ${name} instead of removing it: workspaces used it, and their history refers to it`);
    expect(await db.getRepository(Image).findOneByOrFail({ id: used.imageId })).toMatchObject({ enabled: false });
    expect(await db.query('SELECT image_id FROM workspaces WHERE id = $1', [used.id])).toEqual([{ image_id: used.imageId }]);
  });
});
