/**
 * Issue 19, holes 2 and 3: the desktop's own user (not root) rearranges ~/Downloads and ~/Uploads with symlinks,
 * odd directory names and swaps while files move, trying to make the api read a root-only file (/etc/shadow,
 * 0640 root:shadow) or write into /etc. Every variant must come back with nothing: a refusal or the user's own
 * decoy, never a byte of shadow, and nothing written outside the user's home. The legitimate paths still work.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { ImagesService } from '@ws/images';
import { desktopImage, localDocker, TestApi, waitFor } from './harness';
import { registerLocalServer, streamCookie, waitForRunningWorkspace } from './fixtures';

const UPLOAD_TYPE = 'application/x-workspace-file';
/** The trailing newline of a directory name, as the user's shell makes it ($(…) would strip it). */
const NEWLINE = `nl=$(printf '\\n.'); nl=\${nl%.}`;

interface Answer {
  status: number;
  body: Buffer;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('workspace files: the desktop user cannot steer transfers outside what they may read and write', () => {
  let api: TestApi;
  let base: string;
  let workspaceId: string;
  let containerId: string;
  let cookie: string;
  let shadowLines: string[];

  beforeAll(async () => {
    api = await TestApi.start({ UPLOAD_MAX_MB: 4, DOWNLOAD_MAX_MB: 4 }, { worker: true });
    base = await api.listen();
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    const key = await api.key(['Users Auth Session', 'User']);
    const admin = await api.key(['Global Admin']);
    const userId = (await api.call('create_user', admin, { target_user: { username: 'files-attacker' } })).body.user.user_id;
    workspaceId = (await api.call('request_workspace', key, { user_id: userId, image_id: image.id })).body.workspace_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, userId);
    containerId = running.workspace.container_id;
    cookie = await streamCookie(api.app, running.workspace_url.split('/').pop(), { workspace_id: workspaceId });

    // The premise: shadow has content, and the workspace's user cannot read it.
    shadowLines = (await sh('cat /etc/shadow', 'root')).split('\n').filter((line) => line.length > 8);
    expect(shadowLines.length).toBeGreaterThan(0);
    expect((await localDocker().exec(containerId, { cmd: 'head -c 1 /etc/shadow', timeoutMs: 30_000 })).exitCode).not.toBe(0);
    expect((await sh('id -u')).trim()).not.toBe('0');
  }, 300_000);
  afterAll(async () => api?.close());

  /** A clean home before each attack: no Downloads/Uploads, none of the attacks' leftovers. */
  beforeEach(async () => {
    await sh(`cd "$HOME" && ${NEWLINE} && rm -rf -- Downloads Uploads dl.real dl.evil ul.real ul.evil race.started race.stop race.done "y " y "u " u "u2$nl" u2 "e$nl" e`);
  });

  /** Runs a shell command in the workspace as its user (the attacker), or as root to inspect, and answers stdout. */
  async function sh(cmd: string, user?: 'root'): Promise<string> {
    const result = await localDocker().exec(containerId, { cmd, user, timeoutMs: 30_000, maxOutputBytes: 1024 * 1024 });
    if (result.exitCode !== 0) throw new Error(`${cmd}: exit ${result.exitCode}: ${result.stderr}`);
    return result.stdout;
  }

  function exchange(method: string, path: string, headers: Record<string, string | number> = {}, body?: Buffer): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${base}${path}`, { method, headers: { origin: base, cookie, ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  const download = (name: string) => exchange('GET', `/api/stream/${workspaceId}/downloads/${encodeURIComponent(name)}`);
  const list = () => exchange('GET', `/api/stream/${workspaceId}/downloads`);
  const upload = (name: string, data: Buffer) =>
    exchange('POST', `/api/stream/${workspaceId}/uploads?name=${encodeURIComponent(name)}`, { 'content-type': UPLOAD_TYPE, 'content-length': data.length }, data);

  /** Nothing of /etc/shadow in an answer, whatever its status. */
  function expectNoShadow(answer: Answer): void {
    const text = answer.body.toString('latin1');
    for (const line of shadowLines) expect(text.includes(line)).toBe(false);
  }

  /** Root's view: no upload's temporary or final file anywhere but the user's home, nothing of the user's in /etc. */
  async function expectNothingWrittenOutsideHome(...names: string[]): Promise<void> {
    const found = await sh(
      `find / -xdev \\( -path /proc -o -path /sys -o -path /home/workspace \\) -prune -o \\( -name '.ws-upload-*' ${names.map((n) => `-o -name '${n}'`).join(' ')} \\) -print; find /etc -user "$(id -u workspace)" -print`,
      'root',
    );
    expect(found.split('\n').filter(Boolean)).toEqual([]);
  }

  it('~/Downloads → a directory named "y " and ~/y → /etc: refused, nothing of shadow', async () => {
    await sh('cd "$HOME" && mkdir "y " && printf decoy > "y /shadow" && ln -s /etc y && ln -s "y " Downloads');
    const answer = await download('shadow');
    expectNoShadow(answer);
    expect(answer.status).toBe(409);
    expect(JSON.parse(answer.body.toString()).error_message).toMatch(/Downloads.*space/);
    const listed = await list();
    expect(listed.status).toBe(409);
  });

  it('a newline at the end of the directory name (e\\n, with ~/e → /etc): refused, nothing of shadow', async () => {
    await sh(`cd "$HOME" && ${NEWLINE} && mkdir "e$nl" && printf decoy > "e$nl/shadow" && ln -s /etc e && ln -s "e$nl" Downloads`);
    const answer = await download('shadow');
    expectNoShadow(answer);
    expect(answer.status).toBe(409);
    expect(JSON.parse(answer.body.toString()).error_message).toMatch(/control characters/);
  });

  it('~/Downloads → /etc, and a file symlink ~/Downloads/x → /etc/shadow: 404, nothing of shadow', async () => {
    await sh('cd "$HOME" && ln -s /etc Downloads');
    const direct = await download('shadow');
    expectNoShadow(direct);
    expect(direct.status).toBe(404);
    // The listing runs as the user too: shadow is not even named as downloadable.
    const listed = await list();
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.body.toString()).files.map((f: { name: string }) => f.name)).not.toContain('shadow');

    await sh('cd "$HOME" && rm Downloads && mkdir Downloads && ln -s /etc/shadow Downloads/x && ln -s /etc/hostname Downloads/h');
    for (const name of ['x', 'h']) {
      const answer = await download(name);
      expectNoShadow(answer);
      expect([name, answer.status]).toEqual([name, 404]);
    }
  });

  /**
   * Runs `attack` while the desktop's user flips ~/<dir> between a real directory and a symlink to /etc as fast as
   * it can (bounded: 20000 rounds, or until race.stop appears; race.started after the first, race.done at the end).
   */
  async function duringSwapRace(dir: string, real: string, evil: string, attack: () => Promise<void>): Promise<void> {
    await sh('rm -f "$HOME/race.stop" "$HOME/race.started" "$HOME/race.done"');
    await localDocker().exec(containerId, {
      cmd: `cd "$HOME" && i=0; while [ $i -lt 20000 ] && [ ! -e race.stop ]; do
        mv -T ${evil} ${dir}; mv -T ${dir} ${evil}; mv -T ${real} ${dir}; mv -T ${dir} ${real}
        i=$((i + 1)); [ $i -eq 1 ] && : > race.started
      done 2>/dev/null; echo $i > race.done`,
      wait: false,
    });
    const seen = (file: string) => async () => ((await sh(`[ -e "$HOME/${file}" ] && echo yes || true`)).trim() === 'yes' ? true : undefined);
    try {
      await waitFor('the swap loop to start', seen('race.started'), 30_000);
      await attack();
    } finally {
      await sh(': > "$HOME/race.stop"');
      await waitFor('the swap loop to end', seen('race.done'), 60_000);
    }
  }

  it('~/Downloads flipped between a real directory and a symlink to /etc during downloads: never shadow', async () => {
    await sh('cd "$HOME" && mkdir dl.real && printf decoy > dl.real/shadow && ln -s /etc dl.evil');
    await duringSwapRace('Downloads', 'dl.real', 'dl.evil', async () => {
      for (let round = 0; round < 10; round++) {
        const answers = await Promise.all([download('shadow'), download('shadow'), download('shadow')]);
        for (const answer of answers) {
          expectNoShadow(answer);
          if (answer.status === 200) expect(answer.body.toString()).toBe('decoy');
          else expect([404, 409]).toContain(answer.status);
        }
      }
    });
  });

  it('the same tricks on ~/Uploads write nothing outside the home: refused, or landed in the user\'s own directory', async () => {
    const data = Buffer.from('planted by the desktop user\n');
    await sh('cd "$HOME" && mkdir "u " && ln -s /etc u && ln -s "u " Uploads');
    const spaced = await upload('planted.txt', data);
    expect(spaced.status).toBe(409);
    expect(JSON.parse(spaced.body.toString()).error_message).toMatch(/Uploads.*space/);
    await expectNothingWrittenOutsideHome('planted.txt');

    await sh(`cd "$HOME" && rm Uploads && ${NEWLINE} && mkdir "u2$nl" && ln -s /etc u2 && ln -s "u2$nl" Uploads`);
    expect((await upload('planted.txt', data)).status).toBe(409);
    await expectNothingWrittenOutsideHome('planted.txt');

    await sh('cd "$HOME" && rm Uploads && ln -s /etc Uploads');
    expect((await upload('planted.txt', data)).status).toBe(409);
    await expectNothingWrittenOutsideHome('planted.txt');

    // A name already taken by a symlink to /etc is never written through: the upload gets the next free name.
    await sh('cd "$HOME" && rm Uploads && mkdir Uploads && ln -s /etc/planted.txt Uploads/planted.txt');
    const beside = await upload('planted.txt', data);
    expect(beside.status).toBe(201);
    expect(JSON.parse(beside.body.toString()).name).toBe('planted (1).txt');
    await expectNothingWrittenOutsideHome('planted.txt');
  });

  it('~/Uploads flipped between a real directory and a symlink to /etc during uploads: nothing in /etc', async () => {
    await sh('cd "$HOME" && mkdir ul.real && ln -s /etc ul.evil');
    const landed: string[] = [];
    await duringSwapRace('Uploads', 'ul.real', 'ul.evil', async () => {
      for (let round = 0; round < 10; round++) {
        const answers = await Promise.all([0, 1, 2].map((n) => upload(`raced-${round}-${n}.txt`, Buffer.from(`race ${round} ${n}`))));
        for (const answer of answers) {
          expect([201, 409]).toContain(answer.status);
          if (answer.status === 201) landed.push(JSON.parse(answer.body.toString()).name);
        }
      }
    });
    await expectNothingWrittenOutsideHome('raced-*');
    // What was accepted is complete and the user's, in a real directory of their home (ul.real, or an ~/Uploads the
    // api made while the loop had moved both away); no temporary file is left anywhere.
    const found = (await sh(`find "$HOME" -xdev \\( -name 'raced-*' -o -name '.ws-upload-*' \\) -printf '%f %u\\n'`)).split('\n').filter(Boolean).sort();
    expect(found).toEqual(landed.map((name) => `${name} workspace`).sort());
    for (const name of landed) expect(await sh(`find "$HOME" -xdev -name '${name}' -exec cat {} +`)).toMatch(/^race \d+ \d$/);
  });

  it('positive control: names with inner spaces and Unicode upload and download intact, through a symlinked ~/Downloads too', async () => {
    const name = 'my report — Grüße 報告 (final).txt';
    const data = randomBytes(1024 * 1024 + 3);
    const uploaded = await upload(name, data);
    expect(uploaded.status).toBe(201);
    expect(JSON.parse(uploaded.body.toString())).toEqual({ name, size: data.length });
    expect((await sh(`sha256sum "$HOME/Uploads/${name}"`)).split(' ')[0]).toBe(sha256(data));
    expect((await sh(`stat -c %U "$HOME/Uploads/${name}"`)).trim()).toBe('workspace');

    await sh(`mkdir -p "$HOME/Downloads" && cp "$HOME/Uploads/${name}" "$HOME/Downloads/"`);
    const listed = JSON.parse((await list()).body.toString());
    expect(listed.files.map((f: { name: string }) => f.name)).toEqual([name]);
    const fetched = await download(name);
    expect(fetched.status).toBe(200);
    expect(sha256(fetched.body)).toBe(sha256(data));

    // A ~/Downloads that is a symlink to another directory of the user's is a normal setup and keeps working.
    await sh(`cd "$HOME" && mkdir -p dl.real && mv "Downloads/${name}" dl.real/ && rmdir Downloads && ln -s dl.real Downloads`);
    const viaLink = await download(name);
    expect(viaLink.status).toBe(200);
    expect(sha256(viaLink.body)).toBe(sha256(data));

    // Names with a space at either end are refused as names (they are also not listed).
    expect((await upload('trailing ', Buffer.from('x'))).status).toBe(400);
    expect((await download(' leading')).status).toBe(400);
  });
});
