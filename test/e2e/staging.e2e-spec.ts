import { DataSource } from 'typeorm';
import { toWireId } from '@ws/common';
import { Image, ImagesService } from '@ws/images';
import { ZonesService } from '@ws/zones';
import type { RequestOf } from '@workspace-server/client';
import { HEX32, TestApi, TestKey } from './harness';

/** The five staging-config operations over HTTP: shapes, defaults, updates and 400s that name the field. */
describe('staging configs', () => {
  let api: TestApi;
  let admin: TestKey;
  let zoneId: string;
  let otherZoneId: string;
  let imageId: string;
  let fencedImageId: string;
  let perUserImageId: string;

  beforeAll(async () => {
    api = await TestApi.start();
    const zones = api.app.get(ZonesService);
    zoneId = toWireId((await zones.ensure('default')).id);
    const other = await zones.ensure('other');
    otherZoneId = toWireId(other.id);
    const images = api.app.get(ImagesService);
    imageId = toWireId((await images.upsert({ name: 'example/desktop:1', friendlyName: 'Desktop', portMap: { vnc: '5900/tcp' } })).id);
    const fenced = await images.upsert({ name: 'example/desktop:1', friendlyName: 'Fenced desktop', portMap: { vnc: '5900/tcp' } });
    await api.app.get(DataSource).getRepository(Image).update({ id: fenced.id }, { restrictToZone: true, zoneId: other.id });
    fencedImageId = toWireId(fenced.id);
    const perUser = await images.upsert({
      name: 'example/desktop:1', friendlyName: 'Per-user desktop', portMap: { vnc: '5900/tcp' }, volumeMappings: { '/srv/homes/{user_id}': { bind: '/home/user/data', mode: 'rw' } },
    });
    perUserImageId = toWireId(perUser.id);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  const create = (fields: RequestOf<'create_staging_config'>['target_staging_config']) => api.op('create_staging_config', admin, { target_staging_config: fields });
  const expectRefused = async (res: { status: number; body: { error_message?: string } }, field: string) => {
    expect(res.status).toBe(400);
    expect(res.body.error_message).toContain(field);
  };

  it('creates, reads, lists, updates and deletes a config with every field of the spec', async () => {
    const created = await create({
      zone_id: zoneId, image_id: imageId, num_sessions: 2, expiration: 1.5, allow_workspace_audio: false, allow_workspace_uploads: true,
      allow_workspace_downloads: false, allow_workspace_clipboard_down: true, allow_workspace_clipboard_up: false, allow_workspace_microphone: true,
    });
    expect(created.status).toBe(200);
    const config = created.body.staging_config;
    expect(config).toEqual({
      staging_config_id: expect.stringMatching(HEX32), zone_id: zoneId, zone_name: 'default', image_id: imageId, image_friendly_name: 'Desktop',
      num_sessions: 2, num_current_sessions: 0, expiration: 1.5, allow_workspace_audio: false, allow_workspace_uploads: true,
      allow_workspace_downloads: false, allow_workspace_clipboard_down: true, allow_workspace_clipboard_up: false, allow_workspace_microphone: true,
    });
    const ref = { target_staging_config: { staging_config_id: config.staging_config_id } };

    expect((await api.op('get_staging_config', admin, ref)).body).toEqual({ staging_config: config });
    const listed = await api.op('get_staging_configs', admin);
    expect(listed.status).toBe(200);
    expect(listed.body.staging_configs).toContainEqual(config);

    const updated = await api.op('update_staging_config', admin, {
      target_staging_config: { staging_config_id: config.staging_config_id, num_sessions: 0, allow_workspace_audio: true, zone_id: otherZoneId },
    });
    expect(updated.status).toBe(200);
    expect(updated.body.staging_config).toEqual({ ...config, num_sessions: 0, allow_workspace_audio: true, zone_id: otherZoneId, zone_name: 'other' });

    expect((await api.op('delete_staging_config', admin, ref)).body).toEqual({});
    await expectRefused(await api.op('get_staging_config', admin, ref), 'staging_config_id');
    expect((await api.op('get_staging_configs', admin)).body.staging_configs.map((c: { staging_config_id: string }) => c.staging_config_id)).not.toContain(config.staging_config_id);
  });

  it('takes the deployment client-setting defaults for omitted flags', async () => {
    const created = await create({ zone_id: zoneId, image_id: imageId, num_sessions: 0, expiration: 2 });
    expect(created.status).toBe(200);
    expect(created.body.staging_config).toMatchObject({
      allow_workspace_audio: true, allow_workspace_uploads: true, allow_workspace_downloads: true,
      allow_workspace_clipboard_down: true, allow_workspace_clipboard_up: true, allow_workspace_microphone: false,
    });
  });

  it('refuses bad values with a 400 that names the field', async () => {
    const good = { zone_id: zoneId, image_id: imageId, num_sessions: 1, expiration: 1 };
    await expectRefused(await create({ ...good, num_sessions: -1 }), 'num_sessions');
    await expectRefused(await create({ ...good, num_sessions: 1.5 }), 'num_sessions');
    // Malformed on purpose: past the client's types, raw.
    const raw = (fields: Record<string, unknown>) => api.call('create_staging_config', admin, { target_staging_config: fields });
    await expectRefused(await raw({ ...good, num_sessions: undefined }), 'num_sessions');
    await expectRefused(await create({ ...good, expiration: 0 }), 'expiration');
    await expectRefused(await create({ ...good, expiration: -2 }), 'expiration');
    await expectRefused(await raw({ ...good, expiration: 'soon' }), 'expiration');
    await expectRefused(await raw({ ...good, allow_workspace_audio: 'yes' }), 'allow_workspace_audio');
    await expectRefused(await create({ ...good, zone_id: 'f'.repeat(32) }), 'zone_id');
    await expectRefused(await create({ ...good, zone_id: 'nope' }), 'zone_id');
    await expectRefused(await create({ ...good, image_id: 'e'.repeat(32) }), 'image_id');
    await expectRefused(await create({ ...good, image_id: fencedImageId }), 'image_id');
    await expectRefused(await create({ ...good, image_id: perUserImageId }), 'image_id');
    await expectRefused(await api.call('create_staging_config', admin, {}), 'target_staging_config');

    const inOtherZone = await create({ ...good, zone_id: otherZoneId, image_id: fencedImageId });
    expect(inOtherZone.status).toBe(200);
    const id = inOtherZone.body.staging_config.staging_config_id;
    const update = (fields: Record<string, unknown>) => api.op('update_staging_config', admin, { target_staging_config: { staging_config_id: id, ...fields } });
    await expectRefused(await update({ zone_id: zoneId }), 'image_id');
    await expectRefused(await update({ num_sessions: -3 }), 'num_sessions');
    await expectRefused(await update({ expiration: null }), 'expiration');
    await expectRefused(await update({ staging_config_id: 'a'.repeat(32) }), 'staging_config_id');
    await expectRefused(await api.op('delete_staging_config', admin, { target_staging_config: { staging_config_id: 'nope' } }), 'staging_config_id');
    // Nothing of the refused updates was stored.
    expect((await api.op('get_staging_config', admin, { target_staging_config: { staging_config_id: id } })).body.staging_config).toMatchObject({ zone_id: otherZoneId, num_sessions: 1, expiration: 1 });
  });
});
