/**
 * In-session files at the protocol level (no browser): uploads stream into ~/Uploads of the workspace's user,
 * downloads stream out of ~/Downloads with the same bytes, and everything the settings, the session or the
 * limits forbid is refused with nothing left behind in the container.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest, IncomingMessage } from 'node:http';
import { DataSource } from 'typeorm';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { registerLocalServer, streamCookie, waitForRunningWorkspace } from './fixtures';

const MiB = 1024 * 1024;
const UPLOAD_TYPE = 'application/x-workspace-file';

interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('workspace files: uploads into ~/Uploads, downloads from ~/Downloads', () => {
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let admin: TestKey;
  let ownerId: string;
  let workspaceId: string;
  let shareId: string;
  let containerId: string;
  let ownerCookie: string;

  beforeAll(async () => {
    const imageName = desktopImage();
    api = await TestApi.start({ UPLOAD_MAX_MB: 4, DOWNLOAD_MAX_MB: 4 }, { worker: true });
    base = await api.listen();
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: imageName, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    ownerId = (await api.call('create_user', admin, { target_user: { username: 'files-owner' } })).body.user.user_id;
    const requested = (await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id, enable_sharing: true })).body;
    workspaceId = requested.workspace_id;
    shareId = requested.share_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId);
    containerId = running.workspace.container_id;
    ownerCookie = await streamCookie(api.app, running.workspace_url.split('/').pop(), { workspace_id: workspaceId });
  }, 300_000);
  afterAll(async () => api?.close());

  /** Runs a shell command in the workspace as its user (root: false) and answers stdout. */
  async function sh(cmd: string, user?: 'root'): Promise<string> {
    const result = await localDocker().exec(containerId, { cmd, user, timeoutMs: 30_000, maxOutputBytes: 1024 * 1024 });
    if (result.exitCode !== 0) throw new Error(`${cmd}: exit ${result.exitCode}: ${result.stderr}`);
    return result.stdout;
  }

  /**
   * One HTTP exchange over a real socket. `body` is sent after the headers; `sendBody: false` sends headers only
   * and waits for the answer (a refusal must come before the body is read).
   */
  function exchange(method: string, path: string, options: { headers?: Record<string, string | number>; body?: Buffer; sendBody?: boolean } = {}): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${base}${path}`, { method, headers: { origin: base, ...options.headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
          req.destroy();
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      if (options.sendBody === false) req.flushHeaders();
      else req.end(options.body);
    });
  }

  const uploadPath = (name: string) => `/api/stream/${workspaceId}/uploads?name=${encodeURIComponent(name)}`;
  const upload = (name: string, data: Buffer, cookie = ownerCookie, extra: Record<string, string> = {}) =>
    exchange('POST', uploadPath(name), { headers: { cookie, 'content-type': UPLOAD_TYPE, 'content-length': data.length, ...extra }, body: data });
  const downloadPath = (name: string) => `/api/stream/${workspaceId}/downloads/${encodeURIComponent(name)}`;
  const json = (answer: Answer) => JSON.parse(answer.body.toString('utf8'));
  const uploadsListing = async () => (await sh('ls -A "$HOME/Uploads" 2>/dev/null || true')).split('\n').filter(Boolean).sort();

  it('an upload lands in ~/Uploads with the same bytes, owned by the workspace\'s user; a taken name gets a suffix', async () => {
    const data = randomBytes(3 * MiB + 17);
    const first = await upload('report.bin', data);
    expect(first.status).toBe(201);
    expect(json(first)).toEqual({ name: 'report.bin', size: data.length });
    expect((await sh('sha256sum "$HOME/Uploads/report.bin"')).split(' ')[0]).toBe(sha256(data));
    const [owner, user] = [(await sh('stat -c %u "$HOME/Uploads/report.bin"')).trim(), (await sh('id -u')).trim()];
    expect(owner).toBe(user);
    expect(user).not.toBe('0');

    const other = randomBytes(1000);
    const second = await upload('report.bin', other);
    expect(json(second)).toEqual({ name: 'report (1).bin', size: other.length });
    expect((await sh('sha256sum "$HOME/Uploads/report (1).bin"')).split(' ')[0]).toBe(sha256(other));
    expect((await sh('sha256sum "$HOME/Uploads/report.bin"')).split(' ')[0]).toBe(sha256(data));
    // Names in any script, and an empty file.
    const unicode = await upload('Grüße — 報告.txt', Buffer.alloc(0));
    expect(json(unicode)).toEqual({ name: 'Grüße — 報告.txt', size: 0 });
    expect(await uploadsListing()).toEqual(['Grüße — 報告.txt', 'report (1).bin', 'report.bin']);

    const limits = await exchange('GET', `/api/stream/${workspaceId}/uploads`, { headers: { cookie: ownerCookie } });
    expect(json(limits)).toEqual({ max_bytes: 4 * MiB });
  });

  it('a download streams the same bytes out of ~/Downloads; the list shows the regular files; directories and missing files are 404', async () => {
    await sh('mkdir -p "$HOME/Downloads/folder" && head -c 3500000 /dev/urandom > "$HOME/Downloads/big file.bin" && printf hi > "$HOME/Downloads/.hidden" && ln -sf /etc/hostname "$HOME/Downloads/link"');
    const expected = (await sh('sha256sum "$HOME/Downloads/big file.bin"')).split(' ')[0];

    const list = await exchange('GET', `/api/stream/${workspaceId}/downloads`, { headers: { cookie: ownerCookie } });
    expect(list.status).toBe(200);
    const listed = json(list);
    expect(listed.truncated).toBe(false);
    expect(listed.max_bytes).toBe(4 * MiB);
    expect(listed.files.map((f: { name: string }) => f.name).sort()).toEqual(['.hidden', 'big file.bin']);
    expect(listed.files.find((f: { name: string }) => f.name === 'big file.bin')).toEqual({ name: 'big file.bin', size: 3_500_000, mtime: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$/) });

    const file = await exchange('GET', downloadPath('big file.bin'), { headers: { cookie: ownerCookie } });
    expect(file.status).toBe(200);
    expect(file.headers['content-length']).toBe('3500000');
    expect(file.headers['content-disposition']).toBe(`attachment; filename="big file.bin"; filename*=UTF-8''big%20file.bin`);
    expect(file.body.length).toBe(3_500_000);
    expect(sha256(file.body)).toBe(expected);

    // A browser that goes away part way: the next download is served in full.
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${base}${downloadPath('big file.bin')}`, { headers: { origin: base, cookie: ownerCookie } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) => (req.destroyed ? resolve() : reject(err)));
      req.end();
    });
    const again = await exchange('GET', downloadPath('big file.bin'), { headers: { cookie: ownerCookie } });
    expect(sha256(again.body)).toBe(expected);

    for (const name of ['folder', 'missing.bin', 'link']) {
      const res = await exchange('GET', downloadPath(name), { headers: { cookie: ownerCookie } });
      expect([name, res.status]).toEqual([name, 404]);
      expect(json(res).error_message).toEqual(expect.any(String));
    }
  });

  it('refuses uploads and downloads the settings forbid, a view-only joiner, no session, and another site', async () => {
    const groups = api.app.get(GroupsService);
    const data = randomBytes(100);
    await sh('printf x > "$HOME/Downloads/small.txt"');
    const before = await uploadsListing();
    try {
      await groups.updateSettings('All Users', { clientSettings: { allow_workspace_uploads: false, allow_workspace_downloads: false } });
      expect((await upload('nope.bin', data)).status).toBe(403);
      expect((await exchange('GET', `/api/stream/${workspaceId}/uploads`, { headers: { cookie: ownerCookie } })).status).toBe(403);
      expect((await exchange('GET', `/api/stream/${workspaceId}/downloads`, { headers: { cookie: ownerCookie } })).status).toBe(403);
      const forbidden = await exchange('GET', downloadPath('small.txt'), { headers: { cookie: ownerCookie } });
      expect(forbidden.status).toBe(403);
      expect(json(forbidden).error_message).toMatch(/allow_workspace_downloads/);
    } finally {
      await groups.updateSettings('All Users', { clientSettings: { allow_workspace_uploads: true, allow_workspace_downloads: true } });
    }
    expect((await exchange('GET', downloadPath('small.txt'), { headers: { cookie: ownerCookie } })).body.toString()).toBe('x');

    // A cast config that enforces its own settings overrides the groups' for its workspace.
    const override = (value: Record<string, boolean>) => api.app.get(DataSource).query('UPDATE workspaces SET client_settings_override = $1 WHERE id = $2', [JSON.stringify(value), workspaceId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5')]);
    try {
      await override({ allow_workspace_uploads: false, allow_workspace_downloads: false });
      expect((await upload('cast.bin', data)).status).toBe(403);
      expect((await exchange('GET', downloadPath('small.txt'), { headers: { cookie: ownerCookie } })).status).toBe(403);
    } finally {
      await override({});
    }

    const joined = await api.call('join_workspace', key, { share_id: shareId });
    expect(joined.status).toBe(200);
    const joinerCookie = await streamCookie(api.app, joined.body.session_token, { share_id: shareId });
    expect((await upload('joiner.bin', data, joinerCookie)).status).toBe(403);
    expect((await exchange('GET', `/api/stream/${workspaceId}/downloads`, { headers: { cookie: joinerCookie } })).status).toBe(403);
    expect((await exchange('GET', downloadPath('small.txt'), { headers: { cookie: joinerCookie } })).status).toBe(403);

    expect((await upload('anon.bin', data, '')).status).toBe(401);
    expect((await upload('forged.bin', data, 'ws_stream=not.a.jwt')).status).toBe(401);
    expect((await exchange('GET', downloadPath('small.txt'))).status).toBe(401);
    expect((await upload('evil.bin', data, ownerCookie, { origin: 'https://evil.example' })).status).toBe(403);
    // What a form of another site can send is not an upload.
    const form = await exchange('POST', uploadPath('form.bin'), { headers: { cookie: ownerCookie, 'content-type': 'text/plain' }, body: Buffer.from('{}') });
    expect(form.status).toBe(415);
    expect(await uploadsListing()).toEqual(before);
  });

  it('refuses too large files before reading them, and leaves nothing of an upload cut short', async () => {
    const before = await uploadsListing();
    // Declared over UPLOAD_MAX_MB: refused on the headers alone.
    const tooLarge = await exchange('POST', uploadPath('huge.bin'), { headers: { cookie: ownerCookie, 'content-type': UPLOAD_TYPE, 'content-length': 4 * MiB + 1 }, sendBody: false });
    expect(tooLarge.status).toBe(413);
    expect(json(tooLarge).error_message).toMatch(/upload limit/);
    // No length: a tar entry needs one.
    const chunked = await exchange('POST', uploadPath('chunked.bin'), { headers: { cookie: ownerCookie, 'content-type': UPLOAD_TYPE, 'transfer-encoding': 'chunked' }, body: randomBytes(10) });
    expect(chunked.status).toBe(400);

    // A body that stops half way: the client goes away after 1 MiB of 3.
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${base}${uploadPath('cut.bin')}`, { method: 'POST', headers: { origin: base, cookie: ownerCookie, 'content-type': UPLOAD_TYPE, 'content-length': 3 * MiB } });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(randomBytes(MiB), () => setImmediate(() => req.destroy()));
    });
    // The api notices, stops the archive and removes its temporary file: wait for the directory to be as before.
    await waitFor('~/Uploads as before the cut upload', async () => {
      const now = await uploadsListing();
      return JSON.stringify(now) === JSON.stringify(before) ? true : undefined;
    }, 30_000, 200);

    // A temporary file a day old (an api process died mid-upload) is removed by the next upload; a recent one is not.
    await sh('cd "$HOME/Uploads" && printf old > .ws-upload-0000000000000000.part && touch -d "2 days ago" .ws-upload-0000000000000000.part && printf new > .ws-upload-1111111111111111.part');
    expect((await upload('after.bin', Buffer.from('after'))).status).toBe(201);
    expect(await uploadsListing()).toEqual([...before, '.ws-upload-1111111111111111.part', 'after.bin'].sort());
    await sh('rm -f "$HOME/Uploads/.ws-upload-1111111111111111.part" "$HOME/Uploads/after.bin"');

    await sh('head -c 5000000 /dev/zero > "$HOME/Downloads/over.bin"');
    const overLimit = await exchange('GET', downloadPath('over.bin'), { headers: { cookie: ownerCookie } });
    expect(overLimit.status).toBe(413);
    expect(json(overLimit).error_message).toMatch(/download limit/);
  });

  it('refuses names that would leave the directory or hide in it', async () => {
    const before = await uploadsListing();
    for (const name of ['', '.', '..', '../escape.bin', 'a/b', 'a\\b', 'line\nbreak', 'tab\there', 'x'.repeat(256)]) {
      const res = await upload(name, Buffer.from('x'));
      expect([JSON.stringify(name), res.status]).toEqual([JSON.stringify(name), 400]);
    }
    const missing = await exchange('POST', `/api/stream/${workspaceId}/uploads`, { headers: { cookie: ownerCookie, 'content-type': UPLOAD_TYPE, 'content-length': 1 }, body: Buffer.from('x') });
    expect(missing.status).toBe(400);
    for (const name of ['a\\b', 'bad\u0001name', ' ']) {
      const res = await exchange('GET', downloadPath(name), { headers: { cookie: ownerCookie } });
      expect([name, res.status]).toEqual([name, 400]);
    }
    // `.` and `..` never reach the route as a name, even encoded: the router answers them as unknown paths.
    for (const segment of ['..', '.', '%2E%2E', '%2E']) {
      const res = await exchange('GET', `/api/stream/${workspaceId}/downloads/${segment}`, { headers: { cookie: ownerCookie } });
      expect([segment, res.status]).toEqual([segment, 404]);
      expect(json(res).error_message).not.toMatch(/Downloads/);
    }
    // An encoded slash is still a slash.
    expect((await exchange('GET', `/api/stream/${workspaceId}/downloads/..%2F.bashrc`, { headers: { cookie: ownerCookie } })).status).toBe(400);
    expect(await uploadsListing()).toEqual(before);
  });
});
