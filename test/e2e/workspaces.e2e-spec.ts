import { ChildProcess, spawn } from 'node:child_process';
import { DataSource } from 'typeorm';
import { LABELS } from '@ws/agent';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { WorkspaceRuntime } from '@ws/workspaces';
import { ZonesService } from '@ws/zones';
import type { RequestOf, ResponseOf } from '@workspace-server/client';
import { desktopImage, HEX32, localDocker, Outcome, TestApi, TestKey, TIMESTAMP, waitFor } from './harness';
import { WORKER_JS } from './worker-processes';

describe('workspace lifecycle on a real Docker engine', () => {
  let api: TestApi;
  let key: TestKey;
  let admin: TestKey;
  let imageId: string;
  let userId: string;

  beforeAll(async () => {
    // A short job lock, for every worker of this file: BullMQ paces stall checks by a key all workers share.
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 4, memory: 8 * 1024 ** 3 });
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
    imageId = image.id.replace(/-/g, '');
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    userId = (await api.op('create_user', admin, { target_user: { username: 'worker-bee' } })).body.user.user_id;
  });
  afterAll(async () => api?.close());

  const running = (workspaceId: string, user = userId) =>
    waitFor(`workspace ${workspaceId} running`, async () => {
      const res = await api.op('get_workspace_status', key, { workspace_id: workspaceId, user_id: user });
      const body = res.body;
      if ('workspace' in body && body.workspace.operational_status === 'running') return { ...res, body };
      if ('operational_status' in body && body.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(body)}`);
      return undefined;
    }, 120_000, 100);
  type Status = Outcome<ResponseOf<'get_workspace_status'>>['body'];
  /** get_workspace_status of a live workspace (the other answer is the starting/stopped one). */
  const live = (body: Status) => {
    if (!('workspace' in body)) throw new Error(`not live: ${JSON.stringify(body)}`);
    return body;
  };
  const starting = (body: Status) => {
    if (!('operational_status' in body)) throw new Error(`not starting or stopped: ${JSON.stringify(body)}`);
    return body;
  };
  const gone = (workspaceId: string, user = userId) =>
    waitFor(`workspace ${workspaceId} removed`, async () => {
      const res = await api.op('get_workspace_status', key, { workspace_id: workspaceId, user_id: user });
      return res.status === 400 ? res : undefined;
    }, 60_000, 100);

  it('request → running → exec → keepalive → destroy, with the spec shapes all the way', async () => {
    const requested = await api.op('request_workspace', key, { user_id: userId, image_id: imageId, environment: { GREETING: 'hello' }, client_language: 'de-DE', client_timezone: 'Europe/Berlin' });
    expect(requested.status).toBe(200);
    const r = requested.body;
    expect(r).toEqual({
      workspace_id: expect.stringMatching(HEX32), session_token: expect.any(String), username: 'worker-bee', status: 'starting',
      share_id: expect.stringMatching(/^[0-9a-f]{32}$/), user_id: userId, workspace_url: `/#/connect/workspace/${r.workspace_id}/${userId}/${r.session_token}`,
    });

    const status = (await running(r.workspace_id)).body;
    expect(status).toEqual({ current_time: expect.stringMatching(TIMESTAMP), workspace_url: expect.stringMatching(`^/#/connect/workspace/${r.workspace_id}/${userId}/`), workspace: expect.any(Object) });
    const w = status.workspace;
    expect(w).toEqual({
      workspace_id: r.workspace_id, user_id: userId, image_id: imageId,
      image: { image_id: imageId, name: desktopImage(), image_src: '', friendly_name: 'Desktop' },
      server_id: expect.stringMatching(HEX32), host: '127.0.0.1', hostname: 'local', port: expect.any(Number),
      container_id: expect.stringMatching(/^[0-9a-f]{64}$/), container_ip: expect.any(String),
      start_date: expect.stringMatching(TIMESTAMP), keepalive_date: expect.stringMatching(TIMESTAMP), expiration_date: expect.stringMatching(TIMESTAMP),
      token: expect.stringMatching(/^[0-9a-f]{64}$/), view_only_token: expect.stringMatching(/^[0-9a-f]{64}$/), share_id: r.share_id,
      cores: 1, memory: 512 * 1024 ** 2, operational_status: 'running', operational_message: 'Running', is_persistent_profile: false, persistent_profile_mode: null, point_of_presence: null,
      port_map: { vnc: { port: 5900, path: `api/stream/${r.workspace_id}/vnc` }, uploads: { port: 0, path: `api/stream/${r.workspace_id}/uploads` } },
      client_settings: expect.objectContaining({ allow_workspace_audio: true, idle_disconnect: 0, allow_workspace_sharing: true }),
    });
    expect(Object.keys(w.client_settings)).toHaveLength(14);

    // The container has the image's hard limits, the labels, and the request's environment.
    const state = await localDocker().inspect(w.container_id!);
    expect(state.running).toBe(true);
    expect(state.labels[LABELS.workspaceId]).toBe(w.workspace_id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'));
    expect(state.labels[LABELS.deploymentId]).toBe(api.config.DEPLOYMENT_ID);

    // exec: write a file as the sandboxed user, read it back; root is root; the environment and workdir are honoured.
    const exec = (exec_config: RequestOf<'exec_command_workspace'>['exec_config'], extra: Partial<RequestOf<'exec_command_workspace'>> = { wait: true }) =>
      api.op('exec_command_workspace', admin, { workspace_id: r.workspace_id, user_id: userId, exec_config, ...extra });
    const write = await exec({ cmd: 'echo "$GREETING $EXTRA" > note.txt && id -u', environment: { EXTRA: 'world' }, workdir: '/tmp' });
    expect(write.status).toBe(200);
    expect(write.body).toEqual({ workspace: expect.objectContaining({ workspace_id: r.workspace_id }), current_time: expect.stringMatching(TIMESTAMP), exit_code: 0, stdout: '1000\n', stderr: '', output_truncated: false });
    const read = await exec({ cmd: 'cat /tmp/note.txt; echo "$LANG $TZ"' });
    expect(read.body.stdout).toBe('hello world\nde_DE.UTF-8 Europe/Berlin\n');
    expect((await exec({ cmd: 'id -u', user: 'root' })).body.stdout).toBe('0\n');
    const failing = await exec({ cmd: 'exit 3' });
    expect(failing.body.exit_code).toBe(3);
    const refused = await exec({ cmd: 'id', user: 'bob' });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({ error_message: 'exec_config.user must be root or omitted (got bob)' });
    const detached = await exec({ cmd: 'touch /tmp/detached' }, {});
    expect(detached.body).toEqual({ workspace: expect.any(Object), current_time: expect.stringMatching(TIMESTAMP) });
    await waitFor('detached exec', async () => ((await exec({ cmd: 'test -f /tmp/detached && echo yes || true' })).body.stdout === 'yes\n' ? true : undefined), 10_000);

    // keepalive moves the expiration forward.
    const before = (await api.op('get_workspaces', admin)).body.workspaces.find((x: { workspace_id: string }) => x.workspace_id === r.workspace_id);
    expect(before).toEqual(expect.objectContaining({ server: { port: w.port, hostname: 'local', zone_name: 'default', provider: 'docker' }, user: { username: 'worker-bee' } }));
    const keepalive = await api.op('keepalive', key, { workspace_id: r.workspace_id });
    expect(keepalive.body).toEqual({ usage_reached: false });
    const after = (await api.op('get_workspaces', admin)).body.workspaces.find((x: { workspace_id: string }) => x.workspace_id === r.workspace_id);
    expect(after!.expiration_date >= before!.expiration_date).toBe(true);
    expect(after!.keepalive_date >= before!.keepalive_date).toBe(true);

    // get_user lists the live workspace.
    const user = (await api.op('get_user', admin, { target_user: { user_id: userId } })).body.user;
    expect(user.workspaces).toEqual([expect.objectContaining({ workspace_id: r.workspace_id, server: expect.objectContaining({ hostname: 'local', port: w.port }) })]);

    // destroy answers {} at once; status then confirms removal; the container is gone.
    expect((await api.op('destroy_workspace', key, { workspace_id: r.workspace_id, user_id: userId })).body).toEqual({});
    const removed = await gone(r.workspace_id);
    expect(removed.body).toEqual({ error_message: `Invalid workspace_id (${r.workspace_id})` });
    await expect(localDocker().inspect(w.container_id!)).rejects.toThrow();
    expect(await api.containers()).toEqual([]);
  });

  it('each status call renews the session token: the previous link stops working', async () => {
    const r = (await api.op('request_workspace', key, { user_id: userId, image_id: imageId })).body;
    const first = (await running(r.workspace_id)).body.workspace_url;
    const second = live((await api.op('get_workspace_status', key, { workspace_id: r.workspace_id, user_id: userId, skip_agent_check: true })).body).workspace_url;
    const jwtOf = (url: string) => url.split('/').pop() as string;
    const whoami = (jwt: string) => api.raw().post('/api/client/session').send({ session_jwt: jwt });
    expect((await whoami(jwtOf(first))).status).toBe(401);
    expect((await whoami(r.session_token)).status).toBe(401);
    expect((await whoami(jwtOf(second))).status).toBe(200);
    await api.op('destroy_workspace', key, { workspace_id: r.workspace_id, user_id: userId });
    await gone(r.workspace_id);
  });

  it('an anonymous user is made when user_id is omitted; the default image applies when image_id is omitted', async () => {
    await api.app.get(GroupsService).updateSettings('All Users', { defaultImageId: imageId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5') });
    const res = await api.op('request_workspace', key, {});
    expect(res.status).toBe(200);
    expect(res.body.username).toMatch(/^anonymous-/);
    await running(res.body.workspace_id, res.body.user_id);
    await api.op('destroy_workspace', key, { workspace_id: res.body.workspace_id, user_id: res.body.user_id });
    await gone(res.body.workspace_id, res.body.user_id);
  });

  it('delete_user with force removes the user\'s real workspaces first', async () => {
    const doomed = (await api.op('create_user', admin, { target_user: { username: 'doomed' } })).body.user.user_id;
    const r = (await api.op('request_workspace', key, { user_id: doomed, image_id: imageId })).body;
    const w = (await running(r.workspace_id, doomed)).body.workspace;
    const refused = await api.op('delete_user', admin, { target_user: { user_id: doomed } });
    expect(refused.status).toBe(409);
    expect((await api.op('delete_user', admin, { target_user: { user_id: doomed }, force: true })).body).toEqual({});
    await gone(r.workspace_id, doomed);
    await waitFor('the container to be removed', async () => ((await localDocker().inspect(w.container_id!).then(() => false, () => true)) ? true : undefined), 30_000);
    expect((await api.op('get_user', admin, { target_user: { user_id: doomed } })).status).toBe(400);
  });

  it('get_images lists every field of the spec\'s Image table', async () => {
    const res = await api.op('get_images', admin);
    const image = res.body.images.find((i: { image_id: string }) => i.image_id === imageId);
    expect(image).toEqual({
      image_id: imageId, name: desktopImage(), friendly_name: 'Desktop', description: '', image_src: '',
      restrict_to_network: false, restrict_to_zone: false, restrict_to_server: false, available: true, enabled: true,
      memory: 512 * 1024 ** 2, cores: 1, x_res: 800, y_res: 600, cpu_allocation_method: 'Inherit',
      zone_id: null, zone_name: null, server_id: null, network_name: null, persistent_profile_path: null,
      container_registry: null, container_user: null, container_token: null, hash: null,
      volume_mappings: {}, persistent_profile_config: {}, run_config: {},
      exec_config: { first_launch: { environment: {}, cmd: '' }, go: { cmd: '' } },
      imageAttributes: [{ image_id: imageId, attr_id: expect.stringMatching(HEX32), name: 'vnc', category: 'port_map', value: '5900/tcp' }],
    });
  });

  it('refuses an unknown image with 400 and no capacity with 503', async () => {
    const bad = await api.op('request_workspace', key, { user_id: userId, image_id: 'f'.repeat(32) });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error_message: `Invalid image_id (${'f'.repeat(32)})` });
    const huge = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Huge', cores: 64, memory: 512 * 1024 ** 2 });
    const full = await api.op('request_workspace', key, { user_id: userId, image_id: huge.id });
    expect(full.status).toBe(503);
    expect(full.body.error_message).toMatch(/^No resources are available/);
    // An anonymous request that finds no room leaves no user behind.
    const usersBefore = (await api.op('get_users', admin)).body.users.length;
    expect((await api.op('request_workspace', key, { image_id: huge.id })).status).toBe(503);
    expect((await api.op('get_users', admin)).body.users.length).toBe(usersBefore);
    const env = await api.op('request_workspace', key, { user_id: userId, image_id: imageId, environment: { VNC_PASSWORD: 'x' } });
    expect(env.status).toBe(400);
    expect(env.body.error_message).toBe('environment may not set VNC_PASSWORD; it is set by the service');
  });

  it('client_language takes BCP 47 tags and client_timezone IANA zone names; anything else is a 400 naming the field', async () => {
    for (const [field, value] of [['client_language', 'english'], ['client_language', 'en-US;id'], ['client_timezone', 'Nowhere/Atlantis'], ['client_timezone', '../etc/passwd']]) {
      const refused = await api.op('request_workspace', key, { user_id: userId, image_id: imageId, [field]: value });
      expect([field, value, refused.status]).toEqual([field, value, 400]);
      expect(refused.body.error_message).toContain(field);
    }
    const requested = await api.op('request_workspace', key, { user_id: userId, image_id: imageId, client_language: 'zh-Hant-TW', client_timezone: 'America/Argentina/Buenos_Aires' });
    expect(requested.status).toBe(200);
    const w = (await running(requested.body.workspace_id)).body.workspace;
    const env = (await localDocker().docker.getContainer(w.container_id!).inspect()).Config.Env as string[];
    expect(env).toEqual(expect.arrayContaining(['LANG=zh_TW.UTF-8', 'TZ=America/Argentina/Buenos_Aires']));
    await api.op('destroy_workspace', key, { workspace_id: requested.body.workspace_id, user_id: userId });
    await gone(requested.body.workspace_id);
    for (const [language, timezone] of [['es-419', 'EST5EDT'], ['sr-Latn-RS', 'Asia/Calcutta']]) {
      const accepted = await api.op('request_workspace', key, { user_id: userId, image_id: imageId, client_language: language, client_timezone: timezone });
      expect([language, timezone, accepted.status]).toEqual([language, timezone, 200]);
      await api.op('destroy_workspace', key, { workspace_id: accepted.body.workspace_id, user_id: userId });
      await gone(accepted.body.workspace_id);
    }
  });

  it('destroy_workspace and keepalive refuse unknown ids', async () => {
    const res = await api.op('destroy_workspace', key, { workspace_id: 'nope', user_id: userId });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error_message: 'Invalid workspace_id (nope)' });
    expect((await api.op('keepalive', key, { workspace_id: '0'.repeat(32) })).status).toBe(400);
  });

  it('keepalive answers usage_reached once the group usage_limit is exceeded, and does not reset', async () => {
    const r = (await api.op('request_workspace', key, { user_id: userId, image_id: imageId })).body;
    await running(r.workspace_id);
    await api.app.get(GroupsService).updateSettings('All Users', { usageLimit: 0, usageInterval: 'daily' });
    try {
      const before = live((await api.op('get_workspace_status', key, { workspace_id: r.workspace_id, user_id: userId, skip_agent_check: true })).body).workspace.expiration_date;
      await waitFor('some usage', async () => ((await api.op('keepalive', key, { workspace_id: r.workspace_id })).body.usage_reached ? true : undefined), 10_000);
      const after = live((await api.op('get_workspace_status', key, { workspace_id: r.workspace_id, user_id: userId, skip_agent_check: true })).body).workspace.expiration_date;
      expect(after).toBe(before);
    } finally {
      await api.app.get(GroupsService).updateSettings('All Users', { usageLimit: null });
    }
    await api.op('destroy_workspace', key, { workspace_id: r.workspace_id, user_id: userId });
    await gone(r.workspace_id);
  });

  it('the reaper destroys expired workspaces; the reconciler removes orphans and fails vanished ones', async () => {
    const db = api.app.get(DataSource);
    const runtime = api.app.get(WorkspaceRuntime);
    const a = (await api.op('request_workspace', key, { user_id: userId, image_id: imageId })).body;
    const b = (await api.op('request_workspace', key, { user_id: userId, image_id: imageId })).body;
    await running(a.workspace_id);
    const bStatus = (await running(b.workspace_id)).body.workspace;

    await db.query(`UPDATE workspaces SET expiration_date = now() - interval '1 second' WHERE id = $1`, [a.workspace_id]);
    await runtime.reap();
    await gone(a.workspace_id);

    await localDocker().remove(bStatus.container_id!);
    const orphan = await localDocker().createWorkspaceContainer({
      name: `orphan-${api.config.DEPLOYMENT_ID}`, image: desktopImage(), cores: 0.5, memoryBytes: 256 * 1024 ** 2, env: {}, ports: { vnc: '5900/tcp' },
      labels: { [LABELS.deploymentId]: api.config.DEPLOYMENT_ID, [LABELS.workspaceId]: '00000000-0000-4000-8000-000000000000' },
    });
    const result = await runtime.reconcile();
    expect(result).toEqual({ removed: 1, vanished: 1 });
    await expect(localDocker().inspect(orphan.containerId)).rejects.toThrow();
    const failed = await api.op('get_workspace_status', key, { workspace_id: b.workspace_id, user_id: userId, skip_agent_check: true });
    expect(failed.body).toEqual({
      error_message: expect.stringContaining('is not running'), operational_message: 'The workspace container vanished from its server', operational_progress: 100, operational_status: 'stopped',
    });
    await api.op('destroy_workspace', key, { workspace_id: b.workspace_id, user_id: userId });
    await gone(b.workspace_id);
  });

  it('get_workspace_status notices a container that stopped (skip_agent_check false asks Docker)', async () => {
    const r = (await api.op('request_workspace', key, { user_id: userId, image_id: imageId })).body;
    const w = (await running(r.workspace_id)).body.workspace;
    await localDocker().remove(w.container_id!);
    const stored = await api.op('get_workspace_status', key, { workspace_id: r.workspace_id, user_id: userId, skip_agent_check: true });
    expect(live(stored.body).workspace.operational_status).toBe('running');
    const asked = await api.op('get_workspace_status', key, { workspace_id: r.workspace_id, user_id: userId });
    expect(starting(asked.body).operational_status).toBe('stopped');
    expect(starting(asked.body).operational_message).toMatch(/^The workspace container stopped/);
    await api.op('destroy_workspace', key, { workspace_id: r.workspace_id, user_id: userId });
    await gone(r.workspace_id);
  });

  it('a worker killed in the middle of a provision leaves exactly one running container once a worker runs again', async () => {
    await api.stopWorker();
    const env = {
      ...process.env, DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, DEPLOYMENT_ID: api.config.DEPLOYMENT_ID,
      WORKER_LOCK_MS: '3000', LOG_LEVEL: 'warn',
    };
    const db = api.app.get(DataSource);
    let child: ChildProcess | null = spawn(process.execPath, [WORKER_JS], { cwd: `${__dirname}/../..`, env, stdio: 'inherit' });
    try {
      const r = (await api.op('request_workspace', key, { user_id: userId, image_id: imageId })).body;
      // Kill it once the container exists but before the workspace is recorded as running.
      await waitFor('container created', async () => {
        const [row] = await db.query('SELECT container_id, status FROM workspaces WHERE id = $1', [r.workspace_id]);
        if (row.status !== 'starting') throw new Error(`provision finished before the kill (${row.status}); nothing was interrupted`);
        return row.container_id ? true : undefined;
      }, 60_000, 5);
      child.kill('SIGKILL');
      await new Promise((resolve) => child?.once('exit', resolve));
      child = null;
      // The new worker takes the job over once the dead one's lock lapses.
      await api.startWorker();
      await running(r.workspace_id);
      const containers = (await api.containers()).filter((c) => c.labels[LABELS.workspaceId] === r.workspace_id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'));
      expect(containers).toHaveLength(1);
      expect(containers[0].state).toBe('running');
      await api.op('destroy_workspace', key, { workspace_id: r.workspace_id, user_id: userId });
      await gone(r.workspace_id);
    } finally {
      child?.kill('SIGKILL');
      if (!api.worker) await api.startWorker();
    }
  });
});
