/**
 * Zones: get_zones answers the spec's Zone shape (cloud_secret_access_key masked) and `brief` limits it to id
 * and name; the operator CLI sets every field of a zone.
 */
import { runCli as cli, useApiForCli } from './cli-runner';
import { HEX32, TestApi, TestKey } from './harness';

describe('zones', () => {
  let api: TestApi;
  let viewer: TestKey;
  let restoreEnv: () => Promise<void> = async () => undefined;

  beforeAll(async () => {
    api = await TestApi.start();
    viewer = await api.key(['Zones View']);
    restoreEnv = useApiForCli(api);
  });
  afterAll(async () => {
    await restoreEnv();
    await api?.close();
  });

  const zoneNamed = async (name: string, body: Record<string, unknown> = {}) => {
    const res = await api.call('get_zones', viewer, body);
    expect(res.status).toBe(200);
    return (res.body.zones as Array<Record<string, unknown>>).find((z) => z.zone_name === name);
  };

  it('zone add and zone set change every field; get_zones answers the full shape with the secret masked', async () => {
    const added = JSON.parse(await cli('zone', 'add', 'eu-central', '--cloud-region', 'eu-central-1', '--json'));
    expect(added).toEqual({
      zone_id: expect.stringMatching(HEX32), zone_name: 'eu-central', auto_scaling_enabled: false, cloud_enabled: false, cloud_region: 'eu-central-1',
      cloud_access_key_id: '', cloud_secret_access_key: '', cloud_agent_image_id: '',
    });
    const set = JSON.parse(await cli(
      'zone', 'set', 'eu-central', '--auto-scaling', '--cloud', '--cloud-access-key-id', 'AKIAEXAMPLE', '--cloud-secret-access-key', 'wJalrXUtnFEMI/K7MDENG',
      '--cloud-agent-image-id', 'ami-0123456789', '--json',
    ));
    const expected = {
      zone_id: added.zone_id, zone_name: 'eu-central', auto_scaling_enabled: true, cloud_enabled: true, cloud_region: 'eu-central-1',
      cloud_access_key_id: 'AKIAEXAMPLE', cloud_secret_access_key: '********', cloud_agent_image_id: 'ami-0123456789',
    };
    expect(set).toEqual(expected);
    expect(await zoneNamed('eu-central')).toEqual(expected);
    expect(await zoneNamed('eu-central', { brief: false })).toEqual(expected);

    // Omitted fields keep their value; --no-* turns a flag off; the id works as the reference; a rename.
    const off = JSON.parse(await cli('zone', 'set', added.zone_id, '--no-auto-scaling', '--name', 'eu-central-2', '--json'));
    expect(off).toEqual({ ...expected, zone_name: 'eu-central-2', auto_scaling_enabled: false });
    expect(await zoneNamed('eu-central-2')).toEqual(off);
    const shown = JSON.parse(await cli('zone', 'list', '--show-secrets', '--json')).find((z: { zone_id: string }) => z.zone_id === added.zone_id);
    expect(shown.cloud_secret_access_key).toBe('wJalrXUtnFEMI/K7MDENG');
    expect(await cli('zone', 'list')).not.toContain('wJalrXUtnFEMI');
    await expect(cli('zone', 'set', 'no-such-zone', '--cloud')).rejects.toThrow(/Invalid zone \(no-such-zone\)/);
    await cli('zone', 'add', 'taken');
    await expect(cli('zone', 'set', 'eu-central-2', '--name', 'taken')).rejects.toThrow(/a zone named taken exists/);
  });

  it('brief answers only zone_id and zone_name', async () => {
    await cli('zone', 'add', 'brief-zone', '--cloud', '--cloud-secret-access-key', 'secret');
    const res = await api.call('get_zones', viewer, { brief: true });
    expect(res.status).toBe(200);
    expect(res.body.zones.length).toBeGreaterThan(0);
    for (const zone of res.body.zones) expect(Object.keys(zone).sort()).toEqual(['zone_id', 'zone_name']);
    expect(res.body.zones).toContainEqual({ zone_id: expect.stringMatching(HEX32), zone_name: 'brief-zone' });
    expect(JSON.parse(await cli('zone', 'list', '--brief', '--json'))).toEqual(res.body.zones);
  });

  it('refuses a brief that is not a boolean, and a key without Zones View', async () => {
    const bad = await api.call('get_zones', viewer, { brief: 'yes' });
    expect(bad.status).toBe(400);
    expect(bad.body.error_message).toMatch(/brief must be a boolean/);
    const refused = await api.call('get_zones', await api.key(['Images View']), {});
    expect(refused.status).toBe(403);
  });
});
