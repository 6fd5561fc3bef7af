import { DataSource } from 'typeorm';
import { LABELS } from '@ws/agent';
import { parseId, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { UsersService } from '@ws/users';
import { AnonymousUsers, WorkspaceRuntime } from '@ws/workspaces';
import { ZonesService } from '@ws/zones';
import { desktopImage, TestApi, TestKey, waitFor } from './harness';

/**
 * Issue 19, hole 1: a used desktop was handed to the next user. A launch refused for an anonymous user's id deleted
 * that user; the foreign key nulled its running staged workspace's owner, and staging handed it, files and all, to
 * the next request. Now a launch deletes only a user it made itself, a desktop that was ever someone's never
 * returns to a pool, deleting a user ends its workspaces through the lifecycle, and anonymous users go with their
 * last workspace. Real api, worker, PostgreSQL, Redis and Docker.
 */
describe('launch clean-up: used desktops stay their users\', users end with their workspaces (issue 19)', () => {
  let api: TestApi;
  let admin: TestKey;
  let key: TestKey;
  let db: DataSource;
  let zoneId: string;
  let imageId: string;
  let disabledImageId: string;
  const MARKER = '/tmp/issue19-marker';

  beforeAll(async () => {
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    zoneId = toWireId(zone.id);
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 64 * 1024 ** 3 });
    const images = api.app.get(ImagesService);
    const desktop = { name: desktopImage(), cores: 0.25, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } };
    imageId = toWireId((await images.upsert({ ...desktop, friendlyName: 'Cleanup desktop' })).id);
    disabledImageId = toWireId((await images.upsert({ ...desktop, friendlyName: 'Cleanup disabled', enabled: false })).id);
    admin = await api.key(['Global Admin']);
    key = await api.key(['Users Auth Session', 'User']);
  });
  afterAll(async () => api?.close());

  const readyCount = async (configId: string) =>
    (await api.call('get_staging_config', admin, { target_staging_config: { staging_config_id: configId } })).body.staging_config.num_current_sessions as number;
  /**
   * Waits until the config's pool holds exactly one running ownerless desktop besides `exclude` and get_staging_config
   * counts one ready, and answers its id.
   */
  const oneReady = (configId: string, exclude: string[] = []) =>
    waitFor('one ready staged desktop', async () => {
      const rows: Array<{ id: string }> = await db.query(
        `SELECT id FROM workspaces WHERE staging_config_id = $1 AND user_id IS NULL AND status = 'running' AND NOT id = ANY($2::uuid[])`, [parseId(configId), exclude],
      );
      return rows.length === 1 && (await readyCount(configId)) === 1 ? rows[0].id : undefined;
    }, 240_000, 250);
  const rowOf = async (workspaceId: string) =>
    ((await db.query('SELECT user_id, status, destroy_reason, container_id FROM workspaces WHERE id = $1', [parseId(workspaceId)])) as Array<{
      user_id: string | null; status: string; destroy_reason: string | null; container_id: string | null;
    }>)[0];
  const deleted = (workspaceId: string) =>
    waitFor(`workspace ${workspaceId} deleted`, async () => ((await rowOf(workspaceId)).status === 'deleted' ? true : undefined), 180_000, 250);
  /** The workspace ids and container ids of this deployment's containers. */
  const containersOf = async () => (await api.containers()).flatMap((c) => [c.labels[LABELS.workspaceId], c.id]);
  const userExists = async (userId: string) => (await api.call('get_user', admin, { target_user: { user_id: userId } })).status === 200;
  const tokensOf = async (userId: string) => Number((await db.query('SELECT count(*) AS n FROM session_tokens WHERE user_id = $1', [parseId(userId)]))[0].n);
  const anonymousCount = async () => Number((await db.query('SELECT count(*) AS n FROM users WHERE anonymous'))[0].n);
  const exec = (workspaceId: string, userId: string, cmd: string) =>
    api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: userId, exec_config: { cmd }, wait: true });
  const createUser = async (username: string) => (await api.call('create_user', admin, { target_user: { username } })).body.user.user_id as string;

  it('a launch refused for an anonymous user\'s id keeps that user and its desktop, which nobody else is handed', async () => {
    const configId = (await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: imageId, num_sessions: 1, expiration: 1 } }))
      .body.staging_config.staging_config_id as string;
    const staged = await oneReady(configId);

    // U: an anonymous visitor of the integrator, handed the staged desktop; it writes a file there.
    const u = await api.call('request_workspace', key, { image_id: imageId });
    expect(u.status).toBe(200);
    expect(u.body).toMatchObject({ status: 'running', workspace_id: toWireId(staged) });
    const uId = u.body.user_id as string;
    const planted = await exec(u.body.workspace_id, uId, `echo issue19-secret > ${MARKER} && cat ${MARKER}`);
    expect(planted.body.stdout).toBe('issue19-secret\n');

    // The attack: a launch with U's id that the pipeline refuses (a disabled image).
    const anonymousBefore = await anonymousCount();
    const refused = await api.call('request_workspace', key, { user_id: uId, image_id: disabledImageId });
    expect(refused.status).toBe(400);
    expect(refused.body.error_message).toMatch(/disabled/);
    // U still exists, with its tokens, and its desktop is still U's and running.
    expect(await userExists(uId)).toBe(true);
    expect(await tokensOf(uId)).toBeGreaterThan(0);
    expect(await rowOf(u.body.workspace_id)).toMatchObject({ user_id: parseId(uId), status: 'running' });
    const status = await api.call('get_workspace_status', key, { workspace_id: u.body.workspace_id, user_id: uId });
    expect(status.body.workspace).toMatchObject({ workspace_id: u.body.workspace_id, user_id: uId, operational_status: 'running' });
    expect(await anonymousCount()).toBe(anonymousBefore);
    // A refused launch without user_id still leaves nothing: the user it made for itself goes.
    expect((await api.call('request_workspace', key, { image_id: disabledImageId })).status).toBe(400);
    expect(await anonymousCount()).toBe(anonymousBefore);

    // The next visitor is served from the refilled pool, never U's desktop, and finds no file of U's.
    const refill = await oneReady(configId, [staged]);
    const vId = await createUser('next-visitor');
    const v = await api.call('request_workspace', key, { user_id: vId, image_id: imageId });
    expect(v.status).toBe(200);
    expect(v.body).toMatchObject({ status: 'running', workspace_id: toWireId(refill) });
    expect((await exec(v.body.workspace_id, vId, `cat ${MARKER} 2>/dev/null || echo no-marker`)).body.stdout).toBe('no-marker\n');

    // The database refuses to orphan a live desktop, whoever deletes its owner.
    await expect(db.query('DELETE FROM users WHERE id = $1', [parseId(uId)])).rejects.toMatchObject({ driverError: { code: 'WSL01' } });
    expect(await userExists(uId)).toBe(true);

    // A desktop whose owner was nulled before this fix (legacy row) is not staged: never counted, never handed out,
    // and the reaper ends it.
    await db.query('UPDATE workspaces SET user_id = NULL WHERE id = $1', [staged]);
    const second = await oneReady(configId, [staged, refill]);
    expect(second).not.toBe(staged);
    const wId = await createUser('third-visitor');
    const w = await api.call('request_workspace', key, { user_id: wId, image_id: imageId });
    expect(w.body).toMatchObject({ status: 'running', workspace_id: toWireId(second) });
    await api.app.get(WorkspaceRuntime).reap();
    expect(await rowOf(staged)).toMatchObject({ destroy_reason: 'orphaned' });
    await deleted(staged);
    expect(await containersOf()).not.toContain(staged);

    await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: configId } });
    for (const [workspaceId, userId] of [[v.body.workspace_id, vId], [w.body.workspace_id, wId]]) {
      expect((await api.call('destroy_workspace', key, { workspace_id: workspaceId, user_id: userId })).status).toBe(200);
      await deleted(workspaceId);
    }
  }, 900_000);

  it('delete_user ends the user\'s running desktop through the lifecycle; it is never staged again', async () => {
    const configId = (await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: imageId, num_sessions: 1, expiration: 1 } }))
      .body.staging_config.staging_config_id as string;
    const staged = await oneReady(configId);
    const rId = await createUser('leaving-user');
    const r = await api.call('request_workspace', key, { user_id: rId, image_id: imageId });
    expect(r.body).toMatchObject({ status: 'running', workspace_id: toWireId(staged) });
    const { container_id: containerId } = await rowOf(staged);

    expect((await api.call('delete_user', admin, { target_user: { user_id: rId }, force: true })).status).toBe(200);
    expect(await userExists(rId)).toBe(false);
    // Stopping before its owner went: at no point a running desktop without a user.
    expect(['stopping', 'deleted']).toContain((await rowOf(staged)).status);
    expect((await rowOf(staged)).destroy_reason).toBe('user_deleted');
    const refill = await oneReady(configId, [staged]);
    expect(refill).not.toBe(staged);
    await deleted(staged);
    expect(await containersOf()).not.toContain(staged);
    expect(await containersOf()).not.toContain(containerId);

    await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: configId } });
    await deleted(refill);
  }, 900_000);

  it('anonymous users and their tokens go with their last workspace; a regular user never does', async () => {
    // An anonymous owner (request_workspace without user_id) with two workspaces, its second asked for by its id.
    const first = await api.call('request_workspace', key, { image_id: imageId, enable_sharing: true });
    expect(first.status).toBe(200);
    const ownerId = first.body.user_id as string;
    const second = await api.call('request_workspace', key, { user_id: ownerId, image_id: imageId });
    expect(second.status).toBe(200);
    // Viewers of the first: an anonymous one (join_workspace without user_id) and a regular one.
    const viewer = await api.call('join_workspace', key, { share_id: first.body.share_id });
    expect(viewer.status).toBe(200);
    const viewerId = viewer.body.user_id as string;
    const regularViewerId = await createUser('regular-viewer');
    expect((await api.call('join_workspace', key, { share_id: first.body.share_id, user_id: regularViewerId })).status).toBe(200);
    // A regular owner whose only workspace goes.
    const regularOwnerId = await createUser('regular-owner');
    const regular = await api.call('request_workspace', key, { user_id: regularOwnerId, image_id: imageId });
    expect(regular.status).toBe(200);
    expect(await tokensOf(ownerId)).toBeGreaterThan(0);
    expect(await tokensOf(viewerId)).toBeGreaterThan(0);

    // The first workspace goes: its anonymous viewer with it; the owner stays (its second is live).
    expect((await api.call('destroy_workspace', key, { workspace_id: first.body.workspace_id, user_id: ownerId })).status).toBe(200);
    await deleted(first.body.workspace_id);
    await waitFor('the anonymous viewer removed', async () => (!(await userExists(viewerId)) ? true : undefined), 60_000, 250);
    expect(await tokensOf(viewerId)).toBe(0);
    expect(await userExists(ownerId)).toBe(true);
    expect(await userExists(regularViewerId)).toBe(true);

    // Its last workspace goes: the anonymous owner and its tokens with it.
    expect((await api.call('destroy_workspace', key, { workspace_id: second.body.workspace_id, user_id: ownerId })).status).toBe(200);
    await deleted(second.body.workspace_id);
    await waitFor('the anonymous owner removed', async () => (!(await userExists(ownerId)) ? true : undefined), 60_000, 250);
    expect(await tokensOf(ownerId)).toBe(0);

    // A regular user is never removed that way.
    expect((await api.call('destroy_workspace', key, { workspace_id: regular.body.workspace_id, user_id: regularOwnerId })).status).toBe(200);
    await deleted(regular.body.workspace_id);
    // Delivered to the subscriber (its cursor passed this event) and still there.
    await waitFor('the destroyed event delivered', async () => {
      const rows = await db.query(
        `SELECT 1 FROM workspace_event_deliveries d JOIN workspace_events e ON e.id = d.event_id
          WHERE d.subscriber = 'anonymous-users' AND e.workspace_id = $1 AND e.type = 'destroyed' AND NOT d.failed`, [parseId(regular.body.workspace_id)],
      );
      return rows.length ? true : undefined;
    }, 60_000, 250);
    expect(await userExists(regularOwnerId)).toBe(true);
    expect(await userExists(regularViewerId)).toBe(true);

    // The maintenance sweep, the safety net: an anonymous user nothing holds goes once past the grace, never
    // before it (a launch may not have recorded its workspace yet); regular users stay.
    const stray = await api.app.get(UsersService).createAnonymous();
    const sweeper = api.app.get(AnonymousUsers);
    await sweeper.sweep();
    expect(await userExists(toWireId(stray.id))).toBe(true);
    await sweeper.sweep(0);
    expect(await userExists(toWireId(stray.id))).toBe(false);
    expect(await userExists(regularOwnerId)).toBe(true);
    expect(await userExists(regularViewerId)).toBe(true);
  }, 900_000);
});
