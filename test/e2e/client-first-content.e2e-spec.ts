/**
 * The browser client's way to the first frame (issue 25): its files cached for good under a versioned path and
 * compressed, and `POST /api/client/connect` holding a starting workspace's call until it changes (a trigger's
 * notice), so the page learns `running` without polling; the stream then opens on the connection the api opened
 * ahead.
 */
import { get } from 'node:http';
import { brotliDecompressSync } from 'node:zlib';
import { ImagesService } from '@ws/images';
import { desktopImage, TestApi, TestKey } from './harness';
import { closeStream, openStream, registerLocalServer } from './fixtures';

interface ConnectAnswer {
  operational_status: string;
  operational_progress: number;
  operational_message: string;
}

describe('browser client: first content', () => {
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let imageId: string;
  let userId: string;

  beforeAll(async () => {
    api = await TestApi.start({}, { worker: true });
    base = await api.listen();
    await registerLocalServer(api);
    imageId = (await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 })).id;
    key = await api.key(['Users Auth Session', 'User']);
    const admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'first-content' } })).body.user.user_id;
  }, 300_000);
  afterAll(async () => api?.close());

  it('serves the page\'s files under a versioned, immutable path, compressed when accepted, and revalidates the plain paths', async () => {
    const page = await api.raw().get('/');
    expect(page.status).toBe(200);
    expect(page.headers['cache-control']).toBe('no-cache');
    const client = /<script type="module" src="(\/assets\/[0-9a-f]{16}\/)client\.js"/.exec(page.text);
    expect(client).not.toBeNull();
    const prefix = (client as RegExpExecArray)[1];
    // noVNC is one bundle, preloaded by the page and named for the client's import, under the same prefix.
    expect(page.text).toContain(`<link rel="modulepreload" href="${prefix}viewer.js">`);
    expect(page.text).toContain(`<meta name="viewer-module" content="${prefix}viewer.js">`);
    expect(page.text).toContain(`<link rel="stylesheet" href="${prefix}style.css">`);

    // Read raw (no client-side decoding): the bytes as they travel.
    const raw = (path: string) => new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>((resolve, reject) => {
      get(`${base}${path}`, { headers: { 'accept-encoding': 'gzip, br' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) })).on('error', reject);
      }).on('error', reject);
    });
    const viewer = await raw(`${prefix}viewer.js`);
    expect(viewer.status).toBe(200);
    expect(viewer.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(viewer.headers['content-encoding']).toBe('br');
    expect(viewer.headers['content-type']).toBe('text/javascript; charset=utf-8');
    const viewerSource = brotliDecompressSync(viewer.body).toString('utf8');
    expect(viewerSource).toMatch(/^\/\*! noVNC \d+\.\d+\.\d+, https:\/\/github\.com\/novnc\/noVNC, MPL-2\.0/);
    expect(viewerSource).not.toMatch(/\bfrom\s*["']\.{1,2}\//); // no import left for the browser to discover
    expect((await api.raw().head(`${prefix}client.js`)).status).toBe(200);
    // The bundles exist only under the prefix; the sources stay at their plain paths.
    expect((await api.raw().get('/viewer.js')).status).toBe(404);

    const versioned = await raw(`${prefix}novnc/core/rfb.js`);
    expect(versioned.status).toBe(200);
    expect(versioned.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(versioned.headers['content-encoding']).toBe('br');
    expect(versioned.headers.vary).toBe('accept-encoding');
    const plain = await api.raw().get('/novnc/core/rfb.js').set('accept-encoding', 'identity');
    expect(plain.headers['cache-control']).toBe('no-cache');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(brotliDecompressSync(versioned.body).toString('utf8')).toBe(plain.text);
    expect(versioned.body.length).toBe(Number(versioned.headers['content-length']));
    expect(versioned.body.length).toBeLessThan(Buffer.byteLength(plain.text) / 2);
    const again = await api.raw().get('/novnc/core/rfb.js').set('if-none-match', plain.headers.etag);
    expect(again.status).toBe(304);
    // Nothing outside the files: an unknown path under the prefix is the api's not-found answer.
    expect((await api.raw().get(`${prefix}nope.js`)).status).toBe(404);
  });

  it('holds a starting workspace\'s connect call until it changes, and the stream opens once it runs', async () => {
    const requested = (await api.call('request_workspace', key, { user_id: userId, image_id: imageId })).body;
    expect(requested.status).toBe('starting');
    const jwt = (requested.workspace_url as string).split('/').pop() as string;
    const connect = (wait: boolean) => api.raw().post('/api/client/connect').set('content-type', 'application/json')
      .send({ session_jwt: jwt, workspace_id: requested.workspace_id, ...(wait ? { wait_while_starting: true } : {}) });

    let previous = (await connect(false)).body as ConnectAnswer;
    const woken: boolean[] = [];
    for (let call = 0; previous.operational_status === 'starting' && call < 40; call++) {
      const answer = (await connect(true)).body as ConnectAnswer;
      // Held until something changed (or the 20 s bound on a slow start): a change is what woke it.
      woken.push(answer.operational_status !== 'starting' || answer.operational_progress !== previous.operational_progress || answer.operational_message !== previous.operational_message);
      previous = answer;
    }
    expect(previous.operational_status).toBe('running');
    // The call that brought `running` was made while the workspace was starting, and it was woken by the change.
    expect(woken.length).toBeGreaterThan(0);
    expect(woken[woken.length - 1]).toBe(true);

    // The connect call that saw it running opened the desktop connection ahead; the stream opens on it.
    expect((await connect(false)).status).toBe(200);
    const stream = await openStream(base, requested.workspace_id, jwt);
    try {
      const frame = await stream.rfb.captureFrame({ timeoutMs: 15_000 });
      expect(frame.width).toBe(800);
    } finally {
      await closeStream(stream);
    }
  });
});
