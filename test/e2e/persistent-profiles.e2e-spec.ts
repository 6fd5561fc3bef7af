import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DataSource } from 'typeorm';
import { LABELS } from '@ws/agent';
import { AppConfig, parseId, randomSecret, toWireId } from '@ws/common';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { GENERATION_KEY } from '@ws/profiles';
import { ServersService } from '@ws/servers';
import { hashStream, ObjectStore, openStore, S3ObjectStore } from '@ws/storage';
import { ZonesService } from '@ws/zones';
import { WorkspaceProfiles } from '@ws/workspaces';
import { insertWorkspaceRow } from './fixtures';
import { desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { S3Server, startS3Server } from './s3-server';
import { WorkerProcess } from './worker-processes';

const HOME = '/home/workspace'; // the reference desktop's user and HOME (uid 1000)
const MiB = 1024 * 1024;

interface Pointer {
  location: string;
  object_key: string;
  size: string;
  sha256: string;
  saved_by_workspace_id: string | null;
}

/**
 * Persistent profiles on the real engine with the reference desktop, against both store backends (file:// and
 * s3:// on a real S3-compatible server): a profile written in one workspace is there in the user's next one,
 * Disabled and Reset do what the spec says, the status reports removal only after the save is confirmed, an
 * over-limit profile is refused with the previous one kept, and a worker SIGKILLed mid-save loses nothing.
 */
describe('persistent profiles', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;
  let s3: S3Server;
  let scratch: string;
  let storeSettings: AppConfig;
  const images: Record<'file' | 's3', string> = { file: '', s3: '' };
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'ws-profiles-'));
    s3 = await startS3Server(join(scratch, 's3'), 'ws-profiles');
    const s3Settings = { ...s3.settings, S3_PART_SIZE_MB: 5 };
    api = await TestApi.start(s3Settings, { worker: true });
    storeSettings = { ...api.config, ...s3Settings };
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 16, memory: 64 * 1024 ** 3 });
    const upsert = (friendlyName: string, persistentProfilePath: string) =>
      api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName, cores: 1, memory: 512 * MiB, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' }, persistentProfilePath });
    images.file = toWireId((await upsert('Profiled desktop (file)', `file://${scratch}/profiles/{user_id}/{image_id}`)).id);
    images.s3 = toWireId((await upsert('Profiled desktop (s3)', 's3://ws-profiles/profiles/{username}/{image_id}')).id);
    await allowProfiles(true);
    admin = await api.key(['Global Admin']);
  }, 180_000);

  afterAll(async () => {
    for (const w of workers) await w.kill('SIGKILL').catch(() => undefined);
    await api?.close();
    await s3?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  const allowProfiles = (allowed: boolean) => api.app.get(GroupsService).updateSettings('All Users', { clientSettings: { allow_persistent_profile: allowed } });
  const newUser = async (prefix: string) => (await api.call('create_user', admin, { target_user: { username: `${prefix}.${randomSecret(4)}+x` } })).body.user.user_id as string;
  /** Each requested workspace's owner: the owner-checked operations name it. */
  const owners = new Map<string, string>();
  const request = async (userId: string, imageId: string, mode?: string) => {
    const res = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId, ...(mode ? { persistent_profile_mode: mode } : {}) });
    if (res.status === 200) owners.set(res.body.workspace_id as string, userId);
    return res;
  };
  /** workspace_id and its owner's user_id, for get_workspace_status, destroy_workspace and exec_command_workspace. */
  const owned = (workspaceId: string) => {
    const userId = owners.get(workspaceId);
    if (!userId) throw new Error(`no owner recorded for workspace ${workspaceId}`);
    return { workspace_id: workspaceId, user_id: userId };
  };

  /** Requests a workspace and waits until it runs; answers its wire id. */
  const launch = async (userId: string, imageId: string, mode?: string): Promise<string> => {
    const res = await request(userId, imageId, mode);
    expect(res.status).toBe(200);
    const id = res.body.workspace_id as string;
    await waitFor(`workspace ${id} running`, async () => {
      const status = await api.call('get_workspace_status', admin, owned(id));
      if (status.body.operational_status === 'failed') throw new Error(`workspace ${id} failed: ${status.body.operational_message}`);
      return status.body.workspace?.operational_status === 'running' ? true : undefined;
    }, 180_000, 250);
    return id;
  };
  const exec = async (workspaceId: string, cmd: string): Promise<string> => {
    const res = await api.call('exec_command_workspace', admin, { ...owned(workspaceId), exec_config: { cmd }, wait: true, timeout_seconds: 60 });
    expect(res.status).toBe(200);
    expect(res.body.exit_code).toBe(0);
    return res.body.stdout as string;
  };
  const readMarker = (workspaceId: string, name = 'marker.txt') => exec(workspaceId, `cat ${HOME}/${name} 2>/dev/null || echo absent`).then((s) => s.trim());
  const locationOf = async (workspaceId: string): Promise<string> => (await db.query('SELECT profile_location FROM workspaces WHERE id = $1', [workspaceId]))[0].profile_location;
  const pointer = async (location: string): Promise<Pointer | undefined> => (await db.query('SELECT * FROM persistent_profiles WHERE location = $1', [location]))[0];
  const withStore = async <T>(location: string, use: (store: ObjectStore) => Promise<T>): Promise<T> => {
    const store = openStore(location, storeSettings);
    try {
      return await use(store);
    } finally {
      if (store instanceof S3ObjectStore) store.close();
    }
  };
  const generations = (location: string) =>
    withStore(location, async (store) => {
      const keys: string[] = [];
      for await (const o of store.list('')) if (GENERATION_KEY.test(o.key)) keys.push(o.key);
      return keys.sort();
    });
  /** The pointer's object is there and holds exactly the bytes the pointer records. */
  const expectIntact = async (p: Pointer) =>
    withStore(p.location, async (store) => expect(await hashStream(await store.get(p.object_key))).toEqual({ size: Number(p.size), sha256: p.sha256 }));

  /**
   * destroy_workspace, then get_workspace_status until it reports the workspace removed (400, as for any id that
   * names no live workspace). At that first "removed" answer the saved profile must already be in place.
   */
  const destroyAndConfirm = async (workspaceId: string): Promise<{ messages: string[]; pointerAtRemoval: Pointer | undefined }> => {
    const location = await locationOf(workspaceId);
    expect((await api.call('destroy_workspace', admin, owned(workspaceId))).status).toBe(200);
    const messages: string[] = [];
    const pointerAtRemoval = await waitFor(`workspace ${workspaceId} removed`, async () => {
      const status = await api.call('get_workspace_status', admin, owned(workspaceId));
      if (status.status === 200) {
        const message = status.body.operational_message as string;
        if (messages[messages.length - 1] !== message) messages.push(message);
        return undefined;
      }
      expect(status.status).toBe(400);
      return { p: location ? await pointer(location) : undefined };
    }, 180_000, 100);
    return { messages, pointerAtRemoval: pointerAtRemoval.p };
  };

  for (const backend of ['file', 's3'] as const) {
    it(`${backend}://: Enabled keeps the home for the next workspace, Disabled neither loads nor saves, Reset starts empty`, async () => {
      const userId = await newUser(`profile-${backend}`);
      const imageId = images[backend];
      const marker = `hello-${randomSecret(6)}`;

      // First workspace: nothing saved yet, it starts with the image's home; a file is written there.
      const first = await launch(userId, imageId, 'Enabled');
      const status = await api.call('get_workspace_status', admin, owned(first));
      expect(status.body.workspace).toMatchObject({ is_persistent_profile: true, persistent_profile_mode: 'Enabled' });
      const location = await locationOf(first);
      expect(location).toMatch(backend === 'file' ? /^file:\/\/.+\/profiles\/[0-9a-f]{32}\/[0-9a-f]{32}$/ : /^s3:\/\/ws-profiles\/profiles\/profile-s3\.[0-9a-f]{8}_2Bx\/[0-9a-f]{32}$/);
      expect(await readMarker(first)).toBe('absent');
      await exec(first, `echo ${marker} > ${HOME}/marker.txt && mkdir -p ${HOME}/.config/app && echo nested > ${HOME}/.config/app/settings`);

      // A second live workspace on the same profile is refused while the first one lives (and while it saves).
      const second = await request(userId, imageId, 'Enabled');
      expect(second.status).toBe(409);
      expect(second.body.error_message).toContain('is still using or saving this persistent profile; destroy it and wait until get_workspace_status reports it removed');

      const removed = await destroyAndConfirm(first);
      // Not asserted here: a "Saving the persistent profile" status in between (a small home may save between two
      // polls). The kill test below, whose worker saves at 1 MiB/s, waits for that status deterministically.
      expect(removed.pointerAtRemoval).toMatchObject({ saved_by_workspace_id: parseId(first) });
      const saved = removed.pointerAtRemoval as Pointer;
      await expectIntact(saved);
      expect(await generations(location)).toEqual([saved.object_key]);

      // Enabled: the file is back, owned by the desktop user, nested directories included.
      const next = await launch(userId, imageId, 'Enabled');
      expect(await readMarker(next)).toBe(marker);
      expect((await exec(next, `stat -c %u:%g ${HOME}/marker.txt ${HOME}/.config/app/settings ${HOME}`)).trim().split('\n')).toEqual(['1000:1000', '1000:1000', '1000:1000']);
      expect((await exec(next, `cat ${HOME}/.config/app/settings`)).trim()).toBe('nested');
      await exec(next, `echo second > ${HOME}/second.txt`);
      const afterNext = (await destroyAndConfirm(next)).pointerAtRemoval as Pointer;
      expect(afterNext.object_key).not.toBe(saved.object_key);
      await expectIntact(afterNext);
      expect(await generations(location)).toEqual([afterNext.object_key]); // the previous generation is deleted after the switch

      // Disabled: nothing loaded, nothing saved (and no exclusivity: it names no profile).
      const disabled = await launch(userId, imageId, 'Disabled');
      expect(await readMarker(disabled)).toBe('absent');
      expect(await locationOf(disabled)).toBeNull();
      await exec(disabled, `echo disabled > ${HOME}/marker.txt`);
      const afterDisabled = await destroyAndConfirm(disabled);
      expect(afterDisabled.messages.some((m) => m.startsWith('Saving'))).toBe(false);
      expect(await pointer(location)).toEqual(afterNext);

      // Reset: the saved profile is deleted before the desktop starts; the workspace starts with the image's home.
      const reset = await launch(userId, imageId, 'Reset');
      expect(await readMarker(reset)).toBe('absent');
      expect(await readMarker(reset, 'second.txt')).toBe('absent');
      expect(await pointer(location)).toBeUndefined();
      expect(await generations(location)).toEqual([]);
      // …and is saved again on removal, from then on the profile.
      await exec(reset, `echo after-reset > ${HOME}/marker.txt`);
      const afterReset = (await destroyAndConfirm(reset)).pointerAtRemoval as Pointer;
      await expectIntact(afterReset);
      const again = await launch(userId, imageId, 'Enabled');
      expect(await readMarker(again)).toBe('after-reset');
      await destroyAndConfirm(again);
    }, 600_000);
  }

  it('refuses Enabled and Reset without the client setting allow_persistent_profile (403), and an unusable path (400)', async () => {
    const userId = await newUser('noprofile');
    await allowProfiles(false);
    try {
      for (const mode of ['Enabled', 'Reset']) {
        const res = await request(userId, images.file, mode);
        expect(res.status).toBe(403);
        expect(res.body.error_message).toContain('allow_persistent_profile');
      }
    } finally {
      await allowProfiles(true);
    }
    const bad = await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Profiled desktop (bad path)', cores: 1, memory: 512 * MiB, portMap: { vnc: '5900/tcp' }, persistentProfilePath: '/srv/profiles/{user_id}',
    });
    const res = await request(userId, toWireId(bad.id), 'Enabled');
    expect(res.status).toBe(400);
    expect(res.body.error_message).toContain(`Image (${toWireId(bad.id)})`);
    expect(res.body.error_message).toContain('file://');
    expect(Number((await db.query('SELECT count(*) FROM workspaces WHERE user_id = $1', [parseId(userId)]))[0].count)).toBe(0);
  });

  it('two launches racing for one profile: one workspace gets it, the other a 409 (the unique index decides)', async () => {
    const userId = await newUser('race');
    const answers = await Promise.all([request(userId, images.file, 'Enabled'), request(userId, images.file, 'Enabled')]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const refused = answers.find((a) => a.status === 409);
    expect(refused?.body.error_message).toContain('is still using or saving this persistent profile');
    const winner = answers.find((a) => a.status === 200)?.body.workspace_id as string;
    expect(Number((await db.query("SELECT count(*) FROM workspaces WHERE user_id = $1 AND status <> 'deleted'", [parseId(userId)]))[0].count)).toBe(1);
    await destroyAndConfirm(winner);

    // The index itself, whichever launch got there first: a second live row on one location is a violation that
    // the launch answers as the same 409, never a 500.
    const rows = [await insertWorkspaceRow(db, parseId(userId) as string), await insertWorkspaceRow(db, parseId(userId) as string)];
    // The fixture's rows come with servers of their own: out of placement's and the reconciler's way at once.
    await db.query('UPDATE servers SET enabled = false WHERE id = ANY($1)', [rows.map((r) => r.serverId)]);
    const location = `file://${scratch}/raced`;
    await db.query('UPDATE workspaces SET profile_location = $1 WHERE id = $2', [location, rows[0].id]);
    const violation = await db.query('UPDATE workspaces SET profile_location = $1 WHERE id = $2', [location, rows[1].id]).then(() => null, (err: unknown) => err);
    expect(api.app.get(WorkspaceProfiles).conflictOf(violation)).toMatchObject({ code: 'conflict', message: expect.stringContaining('is still using or saving this persistent profile') });
    await db.query("UPDATE workspaces SET status = 'deleted' WHERE id = $1", [rows[0].id]);
    await db.query('UPDATE workspaces SET profile_location = $1 WHERE id = $2', [location, rows[1].id]); // a deleted row holds nothing
    await db.query("UPDATE workspaces SET status = 'deleted' WHERE id = $1", [rows[1].id]);
  });

  it('a store that fails while saving: the removal waits and retries, the container is kept, then the save goes through', async () => {
    const userId = await newUser('storedown');
    const workspace = await launch(userId, images.file, 'Enabled');
    await exec(workspace, `echo survived > ${HOME}/marker.txt`);
    const location = await locationOf(workspace);
    // The store's directory is a plain file: every write to it fails until the file goes.
    const root = location.slice('file://'.length);
    mkdirSync(dirname(root), { recursive: true });
    writeFileSync(root, 'not a directory');
    try {
      expect((await api.call('destroy_workspace', admin, owned(workspace))).status).toBe(200);
      await waitFor('the save failing and being retried', async () => {
        const status = await api.call('get_workspace_status', admin, owned(workspace));
        expect(status.status).toBe(200); // never reported removed while the profile is unsaved
        return /^Saving the persistent profile failed \(.+\); retrying/.test(status.body.operational_message ?? '') ? true : undefined;
      }, 120_000, 100);
      const [row] = await db.query('SELECT id, status FROM workspaces WHERE id = $1', [parseId(workspace)]);
      expect(row.status).toBe('stopping');
      expect((await api.containers()).filter((c) => c.labels[LABELS.workspaceId] === row.id)).toHaveLength(1);
      expect(await pointer(location)).toBeUndefined();
    } finally {
      rmSync(root, { force: true });
    }
    const saved = await waitFor('the workspace removed once the store works again', async () => {
      const status = await api.call('get_workspace_status', admin, owned(workspace));
      return status.status === 400 ? { p: await pointer(location) } : undefined;
    }, 180_000, 100);
    await expectIntact(saved.p as Pointer);
    const next = await launch(userId, images.file, 'Enabled');
    expect(await readMarker(next)).toBe('survived');
    await destroyAndConfirm(next);
  }, 600_000);

  it('persistent_profile_config.path names the profile directory; one missing at removal saves nothing and says so', async () => {
    const image = await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Profiled desktop (config path)', cores: 1, memory: 512 * MiB, portMap: { vnc: '5900/tcp' },
      persistentProfilePath: `file://${scratch}/configured/{user_id}`,
    });
    await db.query('UPDATE images SET persistent_profile_config = $1 WHERE id = $2', [JSON.stringify({ path: `${HOME}/Documents` }), image.id]);
    const userId = await newUser('configured');
    const first = await launch(userId, toWireId(image.id), 'Enabled');
    await exec(first, `mkdir -p ${HOME}/Documents && echo kept > ${HOME}/Documents/note.txt && echo not-kept > ${HOME}/marker.txt`);
    const saved = (await destroyAndConfirm(first)).pointerAtRemoval as Pointer;
    await expectIntact(saved);
    const second = await launch(userId, toWireId(image.id), 'Enabled');
    expect((await exec(second, `cat ${HOME}/Documents/note.txt`)).trim()).toBe('kept');
    expect(await readMarker(second)).toBe('absent'); // only the configured directory is the profile
    await exec(second, `rm -r ${HOME}/Documents`);
    await destroyAndConfirm(second);
    const [row] = await db.query('SELECT operational_message, profile_state FROM workspaces WHERE id = $1', [parseId(second)]);
    expect(row).toEqual({
      profile_state: 'not_saved',
      operational_message: `Removed. The profile directory ${HOME}/Documents does not exist in the workspace container; the persistent profile was not saved and the previous profile is kept`,
    });
    expect(await pointer(saved.location)).toEqual(saved);
  }, 600_000);

  it('refuses to save a profile over PROFILE_MAX_MB: the status says so, the previous profile is kept', async () => {
    await api.stopWorker();
    await api.startWorker({ PROFILE_MAX_MB: 2 });
    try {
      const userId = await newUser('bigprofile');
      const small = await launch(userId, images.file, 'Enabled');
      await exec(small, `echo small > ${HOME}/marker.txt`);
      const previous = (await destroyAndConfirm(small)).pointerAtRemoval as Pointer;
      expect(previous).toBeDefined();

      const big = await launch(userId, images.file, 'Enabled');
      expect(await readMarker(big)).toBe('small');
      await exec(big, `head -c ${3 * MiB} /dev/urandom > ${HOME}/big.bin && echo big > ${HOME}/marker.txt`);
      const location = await locationOf(big);
      await destroyAndConfirm(big);
      const [row] = await db.query('SELECT status, operational_message, profile_state FROM workspaces WHERE id = $1', [big]);
      expect(row.status).toBe('deleted');
      expect(row.profile_state).toBe('not_saved');
      expect(row.operational_message).toMatch(/^Removed\. The persistent profile \(\d+(\.\d)? MiB\) exceeds PROFILE_MAX_MB \(2 MiB\) and was not saved; the previous profile is kept$/);
      expect(await pointer(location)).toEqual(previous);
      await expectIntact(previous);
      expect(await generations(location)).toEqual([previous.object_key]); // the refused upload left nothing
      expect(readdirSync(join(location.slice('file://'.length), '.tmp'))).toEqual([]);
    } finally {
      await api.stopWorker();
      await api.startWorker();
    }
  }, 600_000);

  it.each(['file', 's3'] as const)('%s://: a worker SIGKILLed while saving loses neither the previous nor the new profile: the save is taken over', async (backend) => {
    // Only worker processes from here on, so the kill hits the one doing the save.
    await api.stopWorker();
    const spawnWorker = (extra: Record<string, string> = {}) => {
      const w = WorkerProcess.spawn(api.settings, extra);
      workers.push(w);
      return w;
    };
    try {
      // 1 MiB/s and an 8 MiB file: the save takes seconds, so the kill lands in the middle of it.
      const slow = spawnWorker({ PROFILE_SYNC_MAX_MBPS: '1' });
      await slow.ready();
      const userId = await newUser('killed');
      const first = await launch(userId, images[backend], 'Enabled');
      await exec(first, `echo before-kill > ${HOME}/marker.txt`);
      const previous = (await destroyAndConfirm(first)).pointerAtRemoval as Pointer;
      expect(previous).toBeDefined();

      const second = await launch(userId, images[backend], 'Enabled');
      expect(await readMarker(second)).toBe('before-kill');
      const bigSha = (await exec(second, `head -c ${8 * MiB} /dev/urandom > ${HOME}/big.bin && echo after-kill > ${HOME}/marker.txt && sha256sum ${HOME}/big.bin | cut -d' ' -f1`)).trim();
      const location = await locationOf(second);
      expect((await api.call('destroy_workspace', admin, owned(second))).status).toBe(200);
      await waitFor('the save under way', async () => {
        const status = await api.call('get_workspace_status', admin, owned(second));
        return /^Saving the persistent profile: [1-9]/.test(status.body.operational_message ?? '') ? true : undefined;
      }, 120_000, 50);
      await slow.kill('SIGKILL');
      // Cut off mid-put: a file store keeps the killed upload's temporary file (swept by a later save once stale).
      if (backend === 'file') expect(readdirSync(join(location.slice('file://'.length), '.tmp')).length).toBeGreaterThan(0);

      // Killed mid-upload: the pointer and the previous generation are untouched, the workspace still stopping,
      // its (stopped) container kept for the retry.
      expect(await pointer(location)).toEqual(previous);
      await expectIntact(previous);
      const [row] = await db.query('SELECT id, status FROM workspaces WHERE id = $1', [parseId(second)]);
      expect(row.status).toBe('stopping');
      const containers = await localDocker().listByLabels({ [LABELS.deploymentId]: api.config.DEPLOYMENT_ID });
      expect(containers.filter((c) => c.labels[LABELS.workspaceId] === row.id)).toHaveLength(1);

      // Another worker takes the job over (stall check) and saves a new generation; only then is it removed.
      const rescuer = spawnWorker();
      await rescuer.ready();
      const saved = await waitFor('the workspace removed after the taken-over save', async () => {
        const status = await api.call('get_workspace_status', admin, owned(second));
        return status.status === 400 ? pointer(location) : undefined;
      }, 180_000, 100);
      expect(saved).toBeDefined();
      expect((saved as Pointer).object_key).not.toBe(previous.object_key);
      await expectIntact(saved as Pointer);
      expect(await generations(location)).toEqual([(saved as Pointer).object_key]);

      const third = await launch(userId, images[backend], 'Enabled');
      expect(await readMarker(third)).toBe('after-kill');
      expect((await exec(third, `sha256sum ${HOME}/big.bin | cut -d' ' -f1`)).trim()).toBe(bigSha);
      await destroyAndConfirm(third);
    } finally {
      for (const w of workers) await w.kill('SIGKILL').catch(() => undefined);
      await api.startWorker();
    }
  }, 600_000);
});
