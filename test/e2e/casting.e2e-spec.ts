import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { HEX32, TestApi, TestKey } from './harness';

const wire = (uuid: string) => uuid.replace(/-/g, '');

/** The five casting-config operations over HTTP: every field, names filled in, key unique, refusals naming the field. */
describe('casting configs', () => {
  let api: TestApi;
  let admin: TestKey;
  let imageId: string;
  let groupId: string;

  beforeAll(async () => {
    api = await TestApi.start();
    imageId = wire((await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Cast desktop', portMap: { vnc: '5900/tcp' } })).id);
    groupId = wire((await api.app.get(GroupsService).findByRef('All Users')).id);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  const create = (fields: Record<string, unknown>) => api.call('create_cast_config', admin, { target_cast_config: fields });
  const every = () => ({
    casting_config_name: 'Kiosk', image_id: imageId, key: `kiosk-${Math.random().toString(36).slice(2, 10)}`, allowed_referrers: ['example.test', 'intranet.test:8443'],
    limit_sessions: true, session_remaining: 5, limit_ips: true, ip_request_limit: 2, ip_request_seconds: 30, error_url: 'https://example.test/sorry',
    enable_sharing: true, disable_control_panel: true, disable_tips: true, disable_fixed_res: false, allow_anonymous: true, group_id: groupId,
    require_recaptcha: false, workspace_url: 'https://example.test/start', dynamic_workspace_url: true, dynamic_container_network: false, allow_resume: false,
    enforce_client_settings: true, allow_workspace_audio: false, allow_workspace_uploads: true, allow_workspace_downloads: false, allow_workspace_clipboard_down: true,
    allow_workspace_clipboard_up: false, allow_workspace_microphone: true, allow_workspace_sharing: false, workspace_audio_default_on: false,
    workspace_ime_mode_default_on: true, valid_until: '2099-12-31 23:59:59',
  });

  it('creates, reads, lists, updates and deletes a config with every field of the spec', async () => {
    const fields = every();
    const created = await create(fields);
    expect(created.status).toBe(200);
    const config = created.body.cast_config;
    expect(config).toEqual({
      ...fields, cast_config_id: expect.stringMatching(HEX32), image_friendly_name: 'Cast desktop', group_name: 'All Users', valid_until: '2099-12-31 23:59:59.000000',
    });
    const ref = { cast_config_id: config.cast_config_id };
    expect((await api.call('get_cast_config', admin, ref)).body).toEqual({ cast_config: config });
    expect((await api.call('get_cast_configs', admin)).body.cast_configs).toContainEqual(config);

    const updated = await api.call('update_cast_config', admin, {
      target_cast_config: { cast_config_id: config.cast_config_id, session_remaining: 0, group_id: null, error_url: null, valid_until: '2030-01-02T03:04:05+01:00', disable_tips: false },
    });
    expect(updated.status).toBe(200);
    expect(updated.body.cast_config).toEqual({ ...config, session_remaining: 0, group_id: null, group_name: null, error_url: null, valid_until: '2030-01-02 02:04:05.000000', disable_tips: false });

    expect((await api.call('delete_cast_config', admin, ref)).body).toEqual({});
    const gone = await api.call('get_cast_config', admin, ref);
    expect(gone.status).toBe(400);
    expect(gone.body.error_message).toContain('cast_config_id');
  });

  it('makes a key when none is given and refuses a duplicate key with 409', async () => {
    const first = await create({ casting_config_name: 'A', image_id: imageId });
    expect(first.status).toBe(200);
    expect(first.body.cast_config.key).toMatch(/^[0-9a-f]{32}$/);
    expect(first.body.cast_config).toMatchObject({ allowed_referrers: [], limit_sessions: false, allow_anonymous: false, group_id: null, valid_until: null });
    const duplicate = await create({ casting_config_name: 'B', image_id: imageId, key: first.body.cast_config.key });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.error_message).toContain('key');
    const second = await create({ casting_config_name: 'C', image_id: imageId });
    const renamed = await api.call('update_cast_config', admin, { target_cast_config: { cast_config_id: second.body.cast_config.cast_config_id, key: first.body.cast_config.key } });
    expect(renamed.status).toBe(409);
  });

  it.each([
    [{ image_id: 'x' }, 'casting_config_name'],
    [{ casting_config_name: 'x' }, 'image_id'],
    [{ casting_config_name: 'x', image_id: '0'.repeat(32) }, 'image_id'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', group_id: '0'.repeat(32) }, 'group_id'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', key: 'has space' }, 'key'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', valid_until: 'tomorrow' }, 'valid_until'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', session_remaining: -1 }, 'session_remaining'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', error_url: 'javascript:alert(1)' }, 'error_url'],
  ])('refuses %j with a 400 naming %s', async (fields, field) => {
    const res = await create(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v === 'IMAGE' ? imageId : v])));
    expect(res.status).toBe(400);
    expect(res.body.error_message).toContain(field);
  });
});
