import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import Docker from 'dockerode';
import { DataSource } from 'typeorm';
import { ExecResult } from '@ws/agent';
import { parseId, randomSecret } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { FIRST_LAUNCH_MARKER, WorkspaceRuntime } from '@ws/workspaces';
import { runCli as cli, useApiForCli } from './cli-runner';
import { desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';


const GIB = 1024 ** 3;
const uuidOf = (wireId: string) => parseId(wireId) as string;

/**
 * Image launch settings on a real Docker engine: run_config, volume_mappings (a bind mount with {user_id}),
 * cpu_allocation_method and exec_config applied at launch, refused on save; and the capacity the local
 * server gets as `npm start` registers it (`server ensure-local`, the reference desktop at 1 core / 1 GiB).
 */
describe('image launch settings and capacity', () => {
  let api: TestApi;
  let key: TestKey;
  let admin: TestKey;
  let db: DataSource;
  let restoreEnv: () => Promise<void> = async () => undefined;
  const mountRoot = `/tmp/ws-e2e-mounts-${randomSecret(4)}`;
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });

  beforeAll(async () => {
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    restoreEnv = useApiForCli(api);
    db = api.app.get(DataSource);
    // Exactly what scripts/start.sh does: the local engine with what Docker reports, the desktop at 1 core / 1 GiB.
    await cli('server', 'ensure-local');
    await cli('image', 'add', desktopImage(), '--friendly-name', 'Desktop', '--description', 'Reference desktop (Xvfb, openbox, xterm)', '--cores', '1', '--memory', '1G');
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => {
    await restoreEnv();
    await api?.close();
    rmSync(mountRoot, { recursive: true, force: true });
  });

  const newUser = async (username: string): Promise<string> => (await api.call('create_user', admin, { target_user: { username } })).body.user.user_id;
  const imageIdOf = async (friendlyName: string) => (await api.app.get(ImagesService).findByRef(friendlyName)).id.replace(/-/g, '');
  const request = async (userId: string, imageId: string) => {
    const res = await api.call('request_workspace', key, { user_id: userId, image_id: imageId });
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: expect.objectContaining({ workspace_id: expect.any(String) }) });
    return res.body.workspace_id as string;
  };
  const running = (workspaceId: string, userId: string) =>
    waitFor(`workspace ${workspaceId} running`, async () => {
      const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
      if (res.body.workspace?.operational_status === 'running') return res.body.workspace as { container_id: string };
      if (res.body.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(res.body)}`);
      return undefined;
    }, 180_000, 200);
  const sh = async (containerId: string, cmd: string) => (await localDocker().exec(containerId, { cmd })) as ExecResult;
  const operationalMessage = async (workspaceId: string): Promise<string> =>
    (await db.query('SELECT operational_message FROM workspaces WHERE id = $1', [workspaceId]))[0].operational_message;

  it('refuses launch settings outside the allowed subset when the image is saved, naming the key', async () => {
    const update = (...args: string[]) => cli('image', 'update', 'Desktop', ...args);
    await expect(update('--run-config', '{"privileged":true}')).rejects.toThrow('Image Desktop: run_config.privileged is not allowed: it would undo the workspace hardening');
    await expect(update('--run-config', '{"security_opt":["no-new-privileges:false"]}')).rejects.toThrow('would undo the workspace hardening');
    await expect(update('--run-config', '{"security_opt":["seccomp=unconfined"]}')).rejects.toThrow('WORKSPACE_SECURITY_OPTS_ALLOWED');
    await expect(update('--run-config', '{"memory_swappiness":0}')).rejects.toThrow('run_config.memory_swappiness is not a supported option; supported: hostname, shm_size, devices, add_host, security_opt');
    await expect(update('--volume-mappings', '{"/srv/{user_id}/../../etc":{"bind":"/x"}}')).rejects.toThrow('must be absolute, without ".."');
    await expect(update('--volume-mappings', '{"/var/run/docker.sock":{"bind":"/var/run/docker.sock"}}')).rejects.toThrow('is not allowed');
    await expect(update('--volume-mappings', '{"/srv/{home}":{"bind":"/x"}}')).rejects.toThrow('unknown template {home}');
    await expect(update('--cpu-allocation-method', 'Hard')).rejects.toThrow('cpu_allocation_method must be one of Inherit, Quotas, Shares');
    // Nothing of the refused values was stored.
    const image = await api.app.get(ImagesService).findByRef('Desktop');
    expect({ run: image.runConfig, volumes: image.volumeMappings, cpu: image.cpuAllocationMethod }).toEqual({ run: {}, volumes: {}, cpu: 'Inherit' });
    // An API caller without Images Modify Resources cannot set them (the rule the CLI, as operator, always passes).
    await expect(api.app.get(ImagesService).update('Desktop', { runConfig: { hostname: 'x' } }, { permissions: ['Images Modify'] })).rejects.toThrow('needs Images Modify Resources (for run_config)');
  });

  it('applies run_config, a {user_id} bind mount and Shares at launch; first_launch runs once per container, go at each hand-off; a failing command only sets the message', async () => {
    const userId = await newUser(`mount.user-${randomSecret(2)}`);
    mkdirSync(`${mountRoot}/${userId}`, { recursive: true, mode: 0o755 });
    writeFileSync(`${mountRoot}/${userId}/hello.txt`, `hello ${userId}\n`, { mode: 0o644 });
    const out = await cli(
      'image', 'add', desktopImage(), '--friendly-name', 'Configured', '--cores', '1', '--memory', '1G', '--cpu-allocation-method', 'Shares',
      '--run-config', JSON.stringify({ hostname: 'launch-test', shm_size: '96m', add_host: ['db.internal:10.11.12.13'], security_opt: ['no-new-privileges'] }),
      '--volume-mappings', JSON.stringify({ [`${mountRoot}/{user_id}`]: { bind: '/mnt/host', mode: 'ro' } }),
      '--env', 'SETUP_NAME=from-image', '--cmd', 'echo "first $SETUP_NAME" >> /tmp/first-launch.log', '--go-cmd', 'echo go >> /tmp/go.log', '--json',
    );
    expect(JSON.parse(out)).toEqual(expect.objectContaining({
      cpu_allocation_method: 'Shares', run_config: expect.objectContaining({ hostname: 'launch-test' }), volume_mappings: { [`${mountRoot}/{user_id}`]: { bind: '/mnt/host', mode: 'ro' } },
    }));
    const workspaceId = await request(userId, await imageIdOf('Configured'));
    const { container_id: containerId } = await running(workspaceId, userId);

    // The host directory of this user, read-only, inside the workspace; the run_config values in effect.
    expect((await sh(containerId, 'cat /mnt/host/hello.txt; hostname; grep db.internal /etc/hosts')).stdout.split('\n').map((l) => l.trim()))
      .toEqual([`hello ${userId}`, 'launch-test', '10.11.12.13\tdb.internal', '']);
    expect((await sh(containerId, 'touch /mnt/host/written 2>/dev/null && echo writable || echo read-only')).stdout.trim()).toBe('read-only');
    const { HostConfig } = await engine.getContainer(containerId).inspect();
    expect({ shares: HostConfig.CpuShares, nano: HostConfig.NanoCpus, shm: HostConfig.ShmSize, opts: HostConfig.SecurityOpt, memory: HostConfig.Memory })
      .toEqual({ shares: 1024, nano: 0, shm: 96 * 1024 ** 2, opts: ['no-new-privileges:true'], memory: GIB });

    const logs = async () => (await sh(containerId, 'cat /tmp/first-launch.log /tmp/go.log 2>/dev/null')).stdout.trim().split('\n');
    expect(await waitFor('first_launch and go ran', async () => { const l = await logs(); return l.length === 2 ? l : undefined; }, 60_000, 200)).toEqual(['first from-image', 'go']);
    expect((await sh(containerId, `test -d ${FIRST_LAUNCH_MARKER} && echo marked`)).stdout.trim()).toBe('marked');

    // A provision that runs again after its worker died (the container already runs): first_launch does not run twice.
    await db.query(`UPDATE workspaces SET status = 'starting' WHERE id = $1`, [uuidOf(workspaceId)]);
    await api.app.get(WorkspaceRuntime).provision(uuidOf(workspaceId), { final: false });
    expect(await logs()).toEqual(['first from-image', 'go', 'go']);
    expect(await operationalMessage(uuidOf(workspaceId))).toBe('Running');

    // A failing first_launch: the workspace keeps running, the message says what failed.
    await cli('image', 'add', desktopImage(), '--friendly-name', 'Broken setup', '--cores', '1', '--memory', '1G', '--cmd', 'echo setup-broke >&2; exit 3', '--go-cmd', 'echo go >> /tmp/go.log');
    const brokenId = await request(userId, await imageIdOf('Broken setup'));
    const broken = await running(brokenId, userId);
    const uuid = uuidOf(brokenId);
    expect(await waitFor('the failure in operational_message', async () => { const m = await operationalMessage(uuid); return m === 'Running' ? undefined : m; }, 60_000, 200))
      .toBe('Running; the first_launch command failed (exit code 3): setup-broke');
    expect((await db.query('SELECT status FROM workspaces WHERE id = $1', [uuid]))[0].status).toBe('running');
    expect((await sh(broken.container_id, 'cat /tmp/go.log 2>/dev/null || echo none')).stdout.trim()).toBe('none'); // go waits for a working setup

    for (const id of [workspaceId, brokenId]) expect((await api.call('destroy_workspace', key, { workspace_id: id, user_id: userId })).status).toBe(200);
    await waitFor('both removed', async () => ((await api.containers()).length === 0 ? true : undefined), 60_000, 200);
  });

  it('8 reference desktops run at once on the local server as npm start registers it (overcommit defaults)', async () => {
    const [server] = await api.app.get(ServersService).list();
    expect({ hostname: server.hostname, cpu: server.cpuOvercommit, memory: server.memoryOvercommit }).toEqual({ hostname: 'local', cpu: 4, memory: 1 });
    const fits = Math.floor(Math.min(server.cores * server.cpuOvercommit, (server.memory * server.memoryOvercommit) / GIB));
    expect(fits).toBeGreaterThanOrEqual(8);
    const imageId = await imageIdOf('Desktop');
    const users = await Promise.all(Array.from({ length: 8 }, (_, i) => newUser(`desk-${i}-${randomSecret(2)}`)));
    const workspaces: string[] = [];
    for (const userId of users) workspaces.push(await request(userId, imageId));
    await Promise.all(workspaces.map((id, i) => running(id, users[i])));
    expect((await api.containers()).filter((c) => c.state === 'running').length).toBe(8);
    if (fits === 8) {
      // On a 2-core machine the 9th is one too many: capacity is enforced, just larger.
      const res = await api.call('request_workspace', key, { user_id: await newUser('ninth'), image_id: imageId });
      expect({ status: res.status, message: res.body.error_message }).toEqual({ status: 503, message: expect.stringContaining('No resources') });
    }
    for (const [i, id] of workspaces.entries()) expect((await api.call('destroy_workspace', key, { workspace_id: id, user_id: users[i] })).status).toBe(200);
    await waitFor('all removed', async () => ((await api.containers()).length === 0 ? true : undefined), 120_000, 200);
  });

  it('server update changes the overcommit placement uses, refusing factors outside (0, 64]', async () => {
    await expect(cli('server', 'update', 'local', '--cpu-overcommit', '0')).rejects.toThrow('The cpu overcommit factor must be a number above 0 and at most 64');
    await expect(cli('server', 'update', 'local', '--memory-overcommit', '65')).rejects.toThrow('The memory overcommit factor must be');
    await expect(cli('server', 'update', 'local', '--cpu-allocation-method', 'Inherit')).rejects.toThrow("A server's cpu allocation method must be Quotas or Shares");
    // 1 core × 1.5: room for one reference desktop (1 core), not two.
    const updated = JSON.parse(await cli('server', 'update', 'local', '--cores', '1', '--cpu-overcommit', '1.5', '--json'));
    expect(updated).toEqual(expect.objectContaining({ hostname: 'local', cores: 1, cpu_overcommit: 1.5, memory_overcommit: 1, cpu_allocation_method: 'Quotas' }));
    const imageId = await imageIdOf('Desktop');
    const onlyOne = await newUser('only-one');
    const first = await request(onlyOne, imageId);
    const second = await api.call('request_workspace', key, { user_id: await newUser('one-too-many'), image_id: imageId });
    expect({ status: second.status, message: second.body.error_message }).toEqual({ status: 503, message: expect.stringContaining('No resources') });
    expect((await api.call('destroy_workspace', key, { workspace_id: first, user_id: onlyOne })).status).toBe(200);
    await waitFor('removed', async () => ((await api.containers()).length === 0 ? true : undefined), 60_000, 200);
  });
});
