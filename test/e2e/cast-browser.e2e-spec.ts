/**
 * Casting links in the browser client: Debian's chromium (playwright-core) opens `/#/cast/<key>` against a real
 * api on loopback with a worker and real workspace containers. An anonymous link opens a live desktop; a visit
 * over the link's address limit lands on its error_url (a loopback page that records the visit); a signed-in
 * visitor who opens a resumable link twice is sent into the same workspace; a link that requires a captcha shows
 * the provider's widget (a loopback stand-in for its script and verify endpoint) and launches only with a token
 * the verify endpoint accepts; a link with allowed_referrers opens from a listed page (the client passes its
 * document.referrer) and refuses a direct visit.
 */
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { SettingsService } from '@ws/settings';
import { ZonesService } from '@ws/zones';
import type { ExecResult } from '@ws/agent';
import { DataSource } from 'typeorm';
import { browserImage, desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { ensureChromium, launchChromium, openClientPage } from './browser';

const X_RES = 800;
const Y_RES = 600;
/**
 * The captcha provider's script, stand-in: grecaptcha.render draws two buttons, one whose token the verify
 * endpoint accepts and one it refuses.
 */
const CAPTCHA_SCRIPT = `window.grecaptcha = { render(el, options) {
  for (const [label, token] of [['I am a person', 'solved'], ['Guess', 'guessed']]) {
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = label;
    button.dataset.sitekey = options.sitekey;
    button.addEventListener('click', () => options.callback(token));
    el.append(button);
  }
  return 0;
} };`;
const SETTLED = ['connected', 'disconnected', 'error', 'ended', 'landing', 'logged-in', 'login-required', 'captcha'];

describe('casting links in the browser client (chromium against a live api and workspaces)', () => {
  let api: TestApi;
  let admin: TestKey;
  let base: string;
  let browser: Browser;
  let imageId: string;
  let browserImageId: string;
  let errorPages: Server;
  let errorBase: string;
  const errorVisits: string[] = [];
  let captchaProvider: Server;
  const captchaScriptLoads: string[] = [];
  const captchaVerifications: URLSearchParams[] = [];
  const contexts: BrowserContext[] = [];
  const logs = new Map<Page, string[]>();

  beforeAll(async () => {
    ensureChromium();
    // Before any worker runs: a build blocks this process (execFileSync) and would cost the workers their job locks.
    const imageName = desktopImage();
    const browserImageName = browserImage();
    // The captcha provider, stand-in on loopback: its script for the browser, its verify endpoint for the api.
    captchaProvider = createServer((req, res) => {
      if (req.url?.startsWith('/recaptcha.js')) {
        captchaScriptLoads.push(req.url);
        res.writeHead(200, { 'content-type': 'text/javascript' }).end(CAPTCHA_SCRIPT);
        return;
      }
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const form = new URLSearchParams(body);
        captchaVerifications.push(form);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success: form.get('secret') === 'the-private-key' && form.get('response') === 'solved' }));
      });
    });
    await new Promise<void>((resolve) => captchaProvider.listen(0, '127.0.0.1', resolve));
    const captchaBase = `http://127.0.0.1:${(captchaProvider.address() as AddressInfo).port}`;
    api = await TestApi.start({ WORKER_LOCK_MS: 3000, RECAPTCHA_SCRIPT_URL: `${captchaBase}/recaptcha.js`, RECAPTCHA_VERIFY_URL: `${captchaBase}/siteverify` });
    base = await api.listen();
    await api.startWorker();
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
    const image = await api.app.get(ImagesService).upsert({ name: imageName, friendlyName: 'Desktop', cores: 0.5, memory: 512 * 1024 ** 2, xRes: X_RES, yRes: Y_RES, portMap: { vnc: '5900/tcp' } });
    imageId = image.id.replace(/-/g, '');
    const browserImageRow = await api.app.get(ImagesService).upsert({
      name: browserImageName, friendlyName: 'Browser', cores: 0.5, memory: 1024 ** 3, xRes: X_RES, yRes: Y_RES, portMap: { vnc: '5900/tcp' },
      isBrowser: true, execConfig: { go: { cmd: 'workspace-browser-open' } },
    });
    browserImageId = browserImageRow.id.replace(/-/g, '');
    admin = await api.key(['Global Admin']);

    // The integrator's error page, on loopback: records which paths the browser was sent to.
    errorPages = createServer((req, res) => {
      errorVisits.push(req.url ?? '');
      // The integrator's page that links to a cast link (allowed_referrers names this host:port).
      const linkTo = /^\/link-to\/([A-Za-z0-9_-]+)$/.exec(req.url ?? '');
      if (linkTo) {
        res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>portal</title><a id="cast" href="${base}/#/cast/${linkTo[1]}">open</a>`);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>sorry</title><p>over the limit</p>');
    });
    await new Promise<void>((resolve) => errorPages.listen(0, '127.0.0.1', resolve));
    errorBase = `http://127.0.0.1:${(errorPages.address() as AddressInfo).port}`;

    browser = await launchChromium();
  }, 600_000);

  afterEach(async () => {
    for (const context of contexts.splice(0)) await context.close().catch(() => undefined);
  });
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await new Promise((resolve) => (errorPages ? errorPages.close(resolve) : resolve(undefined)));
    await new Promise((resolve) => (captchaProvider ? captchaProvider.close(resolve) : resolve(undefined)));
    await api?.close();
  });

  const createLink = async (fields: Record<string, unknown>) => {
    const res = await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: `link ${fields.key as string}`, image_id: imageId, ...fields } });
    expect(res.status).toBe(200);
  };

  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    contexts.push(context);
    const page = await context.newPage();
    const log: string[] = [];
    logs.set(page, log);
    page.on('console', (m) => { if (m.type() === 'error') log.push(`console.error: ${m.text()}`); });
    page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
    return page;
  }

  /** Waits (bounded) until the client settles in `state`; another settled state fails at once, with what the page says. */
  async function expectState(page: Page, state: string, timeoutMs = 180_000): Promise<void> {
    await page.waitForFunction((states) => states.includes(document.body?.dataset.state ?? ''), [state, ...SETTLED.filter((s) => s !== state)], { timeout: timeoutMs, polling: 100 }).catch(() => undefined);
    const actual = await page.evaluate(() => document.body?.dataset.state ?? '');
    if (actual !== state) {
      const text = await page.evaluate(() => document.getElementById('page')?.innerText ?? '');
      throw new Error(`expected state ${state}, got "${actual}"; page says: ${text.replace(/\s+/g, ' ').trim()}\n${(logs.get(page) ?? []).join('\n')}`);
    }
  }

  /** The workspace the client connected to, from its connect route (`#/connect/workspace/<id>/<user_id>`). */
  const connectedWorkspace = (page: Page) => {
    const match = /#\/connect\/workspace\/([0-9a-f]{32})\/([0-9a-f]{32})/.exec(page.url());
    if (!match) throw new Error(`not on a connect route: ${page.url()}`);
    return { workspaceId: match[1], userId: match[2] };
  };

  /** Waits (bounded) until noVNC's canvas shows the reference desktop at its size, mostly its blue background. */
  const desktopRendered = (page: Page) =>
    waitFor('the desktop on the canvas', async () => {
      const sample = await page.evaluate(() => {
        const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas');
        const ctx = canvas?.getContext('2d');
        if (!canvas || !ctx || canvas.width < 2) return null;
        const { data } = ctx.getImageData(0, 0, canvas.width, canvas.height);
        let background = 0;
        for (let i = 0; i < data.length; i += 4) if (Math.abs(data[i] - 0x2e) <= 4 && Math.abs(data[i + 1] - 0x5d) <= 4 && Math.abs(data[i + 2] - 0x87) <= 4) background++;
        return { width: canvas.width, height: canvas.height, background: background / (data.length / 4) };
      });
      return sample && sample.width === X_RES && sample.height === Y_RES && sample.background > 0.3 ? sample : undefined;
    }, 120_000, 250);

  it('an anonymous link opens a live desktop', async () => {
    await createLink({ key: 'anonymous-desktop', allow_anonymous: true });
    const page = await newPage();
    await openClientPage(page, `${base}/#/cast/anonymous-desktop`, logs.get(page));
    await expectState(page, 'connected');
    await desktopRendered(page);
    const { workspaceId, userId } = connectedWorkspace(page);
    // A new anonymous user made for the visit, whose workspace it is.
    const user = await api.call('get_user', admin, { target_user: { user_id: userId } });
    expect(user.status).toBe(200);
    expect(user.body.user.username).toMatch(/^anonymous-/);
    expect(user.body.user.workspaces.map((w: { workspace_id: string }) => w.workspace_id)).toEqual([workspaceId]);
    // No captcha required: the provider's script was not loaded.
    expect(captchaScriptLoads).toEqual([]);
  }, 600_000);

  it('a visit over the address limit lands on the link error_url', async () => {
    await createLink({ key: 'one-per-address', allow_anonymous: true, limit_ips: true, ip_request_limit: 1, ip_request_seconds: 3600, error_url: `${errorBase}/over-the-limit` });
    const first = await newPage();
    await openClientPage(first, `${base}/#/cast/one-per-address`, logs.get(first));
    await waitFor('the first visit sent into its workspace', async () => (first.url().includes('#/connect/workspace/') ? true : undefined), 120_000, 100);

    const second = await newPage();
    await openClientPage(second, `${base}/#/cast/one-per-address`, logs.get(second));
    await waitFor('the second visit on the error page', async () => (second.url().startsWith(`${errorBase}/over-the-limit`) ? true : undefined), 60_000, 100);
    expect(await second.title()).toBe('sorry');
    expect(errorVisits).toContain('/over-the-limit');
  }, 600_000);

  it('a signed-in visitor is sent to sign in first, and a second visit resumes the same workspace', async () => {
    const userId = (await api.call('create_user', admin, { target_user: { username: 'cast-visitor' } })).body.user.user_id as string;
    await createLink({ key: 'resumable', allow_anonymous: false, allow_resume: true });
    const loginPath = async () => new URL((await api.call('get_login', admin, { target_user: { user_id: userId } })).body.url as string).hash;

    // Not signed in: the sign-in page; the login link in that tab comes back to the casting link.
    const page = await newPage();
    await openClientPage(page, `${base}/#/cast/resumable`, logs.get(page));
    await expectState(page, 'login-required');
    await openClientPage(page, `${base}/${await loginPath()}`, logs.get(page));
    await expectState(page, 'connected');
    await desktopRendered(page);
    const first = connectedWorkspace(page);
    expect(first.userId).toBe(userId);

    // Another browser, signed in first: the link resumes the running workspace.
    const again = await newPage();
    await openClientPage(again, `${base}/${await loginPath()}`, logs.get(again));
    await expectState(again, 'logged-in');
    await openClientPage(again, `${base}/#/cast/resumable`, logs.get(again));
    await expectState(again, 'connected');
    await desktopRendered(again);
    expect(connectedWorkspace(again)).toEqual(first);
  }, 600_000);

  it('a link that requires a captcha launches with a token the verify endpoint accepts, and refuses a guessed one', async () => {
    const settings = api.app.get(SettingsService);
    await settings.set('recaptcha_site_key', 'the-site-key');
    await settings.set('recaptcha_private_key', 'the-private-key');
    await createLink({ key: 'with-captcha', allow_anonymous: true, require_recaptcha: true });

    const refused = await newPage();
    await openClientPage(refused, `${base}/#/cast/with-captcha`, logs.get(refused));
    await expectState(refused, 'captcha');
    // The widget was drawn with the site key from the settings.
    expect(await refused.getAttribute('#cast-captcha button >> nth=0', 'data-sitekey')).toBe('the-site-key');
    await refused.click('#cast-captcha button:has-text("Guess")');
    await expectState(refused, 'error');
    expect(await refused.textContent('#cast-reason')).toBe('captcha_failed');

    const solved = await newPage();
    await openClientPage(solved, `${base}/#/cast/with-captcha`, logs.get(solved));
    await expectState(solved, 'captcha');
    await solved.click('#cast-captcha button:has-text("I am a person")');
    await expectState(solved, 'connected');
    await desktopRendered(solved);
    expect(captchaVerifications.map((form) => [form.get('secret'), form.get('response')])).toEqual([['the-private-key', 'guessed'], ['the-private-key', 'solved']]);
    expect(captchaScriptLoads.length).toBe(2);
  }, 600_000);

  it('a link with allowed_referrers opens from a listed page and is refused when opened directly', async () => {
    await createLink({ key: 'from-portal', allow_anonymous: true, allowed_referrers: [new URL(errorBase).host] });
    const direct = await newPage();
    await openClientPage(direct, `${base}/#/cast/from-portal`, logs.get(direct));
    await expectState(direct, 'error');
    expect(await direct.textContent('#cast-reason')).toBe('referrer');

    const linked = await newPage();
    await openClientPage(linked, { from: `${errorBase}/link-to/from-portal`, click: '#cast' }, logs.get(linked));
    await expectState(linked, 'connected');
    await desktopRendered(linked);
  }, 600_000);

  it('a link to the browser image opens the page its workspace_url argument names in the kiosk', async () => {
    await createLink({ key: 'browse', image_id: browserImageId, allow_anonymous: true, dynamic_workspace_url: true });
    const pageUrl = 'http://127.0.0.1:8123/from-the-link?x=1';
    const page = await newPage();
    await openClientPage(page, `${base}/#/cast/browse?workspace_url=${encodeURIComponent(pageUrl)}`, logs.get(page));
    await expectState(page, 'connected');
    const { workspaceId } = connectedWorkspace(page);
    const [{ container_id: containerId }] = await api.app.get(DataSource).query('SELECT container_id FROM workspaces WHERE replace(id::text, \'-\', \'\') = $1', [workspaceId]);
    // The kiosk chromium runs with the link's URL among its arguments.
    const kiosk = await waitFor('the kiosk on the link URL', async () => {
      const out = (await localDocker().exec(containerId, {
        cmd: 'url=$(head -n 1 /tmp/workspace-browser/url 2>/dev/null) && pid=$(cat /tmp/workspace-browser/chromium.pid 2>/dev/null) && tr "\\0" "\\n" < /proc/$pid/cmdline | grep -Fx -- "$url" || true',
        wait: true, timeoutMs: 30_000,
      })) as ExecResult;
      return out.stdout.trim() || undefined;
    }, 120_000, 250);
    expect(kiosk).toBe(pageUrl);
  }, 600_000);
});
