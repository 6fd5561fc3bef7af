/**
 * The browser client end to end: a real api listening on loopback, a real workspace container, and
 * Debian's Chromium headless shell (scripts/ensure-browser.sh installs it) driven by playwright-core. The page connects
 * through POST /api/client/connect and the stream gateway's websocket, renders the desktop with noVNC,
 * and a view-only joiner's input provably never reaches the desktop.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { TestApi, TestKey, waitFor } from './harness';
import { launchChromium, openClientPage, shownUrl, startBrowserSuiteApi } from './browser';
import { registerLocalServer, waitForRemovedWorkspace, waitForRunningWorkspace } from './fixtures';

const ROOT = join(__dirname, '..', '..');
const RESULTS = join(ROOT, 'test-results');
const X_RES = 800;
const Y_RES = 600;

/** What the desktop's canvas shows: its size, the share of the background colour and of white (the xterm), and the white area's box. */
interface CanvasSample {
  width: number;
  height: number;
  background: number;
  white: number;
  colours: number;
  box: { left: number; top: number; right: number; bottom: number } | null;
}

describe('browser client (noVNC in chromium against a live api and workspace)', () => {
  let api: TestApi;
  let key: TestKey;
  let admin: TestKey;
  let base: string;
  let browser: Browser;
  let ownerId: string;
  let workspaceId: string;
  let shareId: string;
  let ownerUrl: string;
  const contexts: BrowserContext[] = [];
  const diagnostics = new Map<Page, string[]>();

  beforeAll(async () => {
    mkdirSync(RESULTS, { recursive: true });
    // One idle_disconnect minute is a second here (only the idle test sets idle_disconnect).
    const started = await startBrowserSuiteApi({ IDLE_DISCONNECT_MINUTE_MS: 1000 });
    ({ api, base } = started);
    const page = await api.raw().get('/');
    if (page.status !== 200) throw new Error(`GET / answered ${page.status}: the browser client is not served (createApi must call registerWebClient from apps/api/src/web/web-client)`);

    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: started.imageName, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: X_RES, yRes: Y_RES, portMap: { vnc: '5900/tcp' } });
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    ownerId = (await api.call('create_user', admin, { target_user: { username: 'browser-owner' } })).body.user.user_id;

    const requested = await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id.replace(/-/g, ''), enable_sharing: true });
    expect(requested.status).toBe(200);
    workspaceId = requested.body.workspace_id;
    shareId = requested.body.share_id;
    // The last status call renews the owner's token: its workspace_url is the one link that works now.
    // It is read once and reused by every test (another status call would supersede it).
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId, 200);
    ownerUrl = running.workspace_url;
    expect(ownerUrl).toMatch(new RegExp(`^/#/connect/workspace/${workspaceId}/${ownerId}/[^/?]+$`));

    browser = await launchChromium();
  }, 600_000);

  afterEach(async () => {
    for (const context of contexts.splice(0)) await context.close().catch(() => undefined);
  });
  afterAll(async () => {
    for (const context of contexts.splice(0)) await context.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    if (api && workspaceId) {
      // Let the destroy job finish before the worker stops (a worker closed mid-job is not what we test here).
      await api.call('destroy_workspace', key, { workspace_id: workspaceId, user_id: ownerId });
      await waitForRemovedWorkspace(api, key, workspaceId, ownerId)
        .catch((err: Error) => console.warn(err.message));
    }
    await api?.close();
  });

  const connectCalls = new Map<Page, number>();

  /** A fresh browser context (one per user: cookies are per context) with the client open at `path`. */
  async function open(path: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    contexts.push(context);
    const page = await context.newPage();
    const log: string[] = [];
    diagnostics.set(page, log);
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.push(`console.${m.type()}: ${m.text()}`); });
    page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
    page.on('requestfailed', (r) => log.push(`requestfailed: ${shownUrl(r.url())} ${r.failure()?.errorText ?? ''}`));
    // The connect calls of the document shown now that reached the api (loading it again starts the count again; a
    // call Chromium cut off, on a host network change, is taken back: the client then sends its own).
    const isConnect = (r: Request) => new URL(r.url()).pathname === '/api/client/connect';
    page.on('request', (r) => {
      if (r.isNavigationRequest() && r.frame() === page.mainFrame()) connectCalls.set(page, 0);
      else if (isConnect(r)) connectCalls.set(page, (connectCalls.get(page) ?? 0) + 1);
    });
    page.on('requestfailed', (r) => { if (isConnect(r)) connectCalls.set(page, (connectCalls.get(page) ?? 0) - 1); });
    await openClientPage(page, base + path, log);
    return page;
  }

  const stateOf = (page: Page) => page.evaluate(() => document.body.dataset.state ?? '');

  /** Waits (bounded) until the client settles in `state`; any other settled state fails at once, with what the page says. */
  async function expectState(page: Page, state: string, timeoutMs = 60_000): Promise<void> {
    const settled = ['connected', 'disconnected', 'error', 'ended', 'landing', 'logged-in'];
    try {
      await page.waitForFunction((states) => states.includes(document.body.dataset.state ?? ''), [state, ...settled.filter((s) => s !== state)], { timeout: timeoutMs, polling: 100 });
    } catch {
      // fall through to the report below
    }
    const actual = await stateOf(page);
    if (actual !== state) {
      const text = await page.evaluate(() => document.getElementById('page')?.innerText ?? '');
      throw new Error(`expected state ${state}, got "${actual}"; page says: ${text.replace(/\s+/g, ' ').trim()}\n${(diagnostics.get(page) ?? []).join('\n')}`);
    }
  }

  /** Reads noVNC's canvas: the framebuffer at its own resolution. */
  const sampleCanvas = (page: Page): Promise<CanvasSample | null> => page.evaluate(() => {
    const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas');
    const ctx = canvas?.getContext('2d');
    if (!canvas || !ctx || canvas.width < 2 || canvas.height < 2) return null;
    const { data } = ctx.getImageData(0, 0, canvas.width, canvas.height);
    let background = 0;
    let white = 0;
    let left = Infinity;
    let top = Infinity;
    let right = -1;
    let bottom = -1;
    const colours = new Set<number>();
    for (let i = 0, p = 0; i < data.length; i += 4, p++) {
      const [r, g, b] = [data[i], data[i + 1], data[i + 2]];
      if (colours.size < 64) colours.add((r << 16) | (g << 8) | b);
      if (Math.abs(r - 0x2e) <= 4 && Math.abs(g - 0x5d) <= 4 && Math.abs(b - 0x87) <= 4) background++;
      else if (r >= 245 && g >= 245 && b >= 245) {
        white++;
        const x = p % canvas.width;
        const y = Math.floor(p / canvas.width);
        left = Math.min(left, x);
        right = Math.max(right, x);
        top = Math.min(top, y);
        bottom = Math.max(bottom, y);
      }
    }
    const total = canvas.width * canvas.height;
    return { width: canvas.width, height: canvas.height, background: background / total, white: white / total, colours: colours.size, box: right >= 0 ? { left, top, right, bottom } : null };
  });

  /** Waits (bounded) until the canvas shows the reference desktop: its blue background and a white xterm. */
  async function desktopRendered(page: Page): Promise<CanvasSample> {
    let last: CanvasSample | null = null;
    try {
      return await waitFor('the desktop on the canvas', async () => {
        last = await sampleCanvas(page);
        return last && last.colours > 1 && last.background > 0.1 && last.white > 0.05 && last.box ? last : undefined;
      }, 30_000, 200);
    } catch (err) {
      throw new Error(`${(err as Error).message}; last sample: ${JSON.stringify(last)}\n${(diagnostics.get(page) ?? []).join('\n')}`);
    }
  }

  /** Clicks at a framebuffer position, whatever noVNC's scaling of the canvas. */
  async function clickDesktop(page: Page, x: number, y: number): Promise<void> {
    const point = await page.evaluate(([fx, fy]) => {
      const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas') as HTMLCanvasElement;
      const rect = canvas.getBoundingClientRect();
      return { x: rect.left + ((fx + 0.5) * rect.width) / canvas.width, y: rect.top + ((fy + 0.5) * rect.height) / canvas.height };
    }, [x, y]);
    await page.mouse.click(point.x, point.y);
  }

  /** Types a shell command into the xterm (clicking into its window first) and presses Enter. */
  async function typeIntoXterm(page: Page, sample: CanvasSample, command: string): Promise<void> {
    const box = sample.box as NonNullable<CanvasSample['box']>;
    await clickDesktop(page, Math.round((box.left + box.right) / 2), Math.round((box.top + box.bottom) / 2));
    await page.keyboard.type(command, { delay: 15 });
    await page.keyboard.press('Enter');
  }

  const exec = (cmd: string) => api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: ownerId, exec_config: { cmd }, wait: true });
  const fileExists = async (path: string) => {
    const res = await exec(`test -f ${path} && echo yes || echo no`);
    expect(res.status).toBe(200);
    return res.body.stdout === 'yes\n';
  };

  it('the owner\'s link shows the live desktop', async () => {
    const page = await open(`${ownerUrl}?disable_tips=1`);
    await expectState(page, 'connected');
    expect(await page.evaluate(() => {
      const rfb = (window as unknown as { __rfb?: { viewOnly: boolean; scaleViewport: boolean; resizeSession: boolean } }).__rfb;
      return rfb ? { viewOnly: rfb.viewOnly, scaleViewport: rfb.scaleViewport, resizeSession: rfb.resizeSession } : null;
    })).toEqual({ viewOnly: false, scaleViewport: true, resizeSession: false });

    const sample = await desktopRendered(page);
    expect(sample).toEqual(expect.objectContaining({ width: X_RES, height: Y_RES }));
    // The xterm (geometry +40+40) sits in the top-left part of the screen, inside it.
    expect(sample.box).toEqual(expect.objectContaining({ left: expect.any(Number), top: expect.any(Number) }));
    const box = sample.box as NonNullable<CanvasSample['box']>;
    expect(box.left).toBeGreaterThanOrEqual(20);
    expect(box.top).toBeGreaterThanOrEqual(20);
    expect(box.right).toBeLessThan(X_RES);
    expect(box.bottom).toBeLessThan(Y_RES);
    await page.screenshot({ path: join(RESULTS, 'browser-client-owner.png') });
    expect(await page.locator('#control-panel').count()).toBe(1);
    expect(await page.locator('#tips-dialog').count()).toBe(0);
    expect(await page.locator('#view-only-badge').count()).toBe(0);

    // The link's first connect call left from the page's inline script (allowed by its hash: no CSP report), before
    // the client's modules ran, and the client took its answer instead of calling again.
    const marks = await page.evaluate(() => Object.fromEntries(['connect-sent', 'page-start'].map((name) => [name, performance.getEntriesByName(`client:${name}`)[0]?.startTime ?? null])));
    expect(marks['connect-sent']).not.toBeNull();
    expect(marks['connect-sent']).toBeLessThan(marks['page-start'] as number);
    expect(connectCalls.get(page)).toBe(1);
    expect((diagnostics.get(page) ?? []).filter((line) => /Content Security Policy/i.test(line))).toEqual([]);
  });

  it('takes the link\'s JWT out of the address bar and history; a reload and back/forward still show the desktop', async () => {
    const jwt = ownerUrl.split('/').pop() as string;
    const page = await open(`${ownerUrl}?disable_tips=1`);
    await expectState(page, 'connected');
    await desktopRendered(page);
    // The route stays (without the JWT), and so do the session component arguments.
    expect(page.url()).toBe(`${base}/#/connect/workspace/${workspaceId}/${ownerId}?disable_tips=1`);
    expect(await page.evaluate(() => location.href)).not.toContain(jwt);
    expect(await page.evaluate(() => JSON.stringify(history.state))).not.toContain(jwt);

    // A reload finds the JWT in this tab's sessionStorage and connects again.
    await page.reload();
    await expectState(page, 'connected');
    await desktopRendered(page);
    expect(page.url()).not.toContain(jwt);

    // Every history entry of the tab is JWT-free: back leaves the client, forward comes back to it and connects.
    await page.goBack();
    expect(page.url()).not.toContain(jwt);
    await page.goForward();
    await page.waitForFunction(() => document.documentElement.dataset.app === 'ready', null, { timeout: 30_000 });
    expect(page.url()).toBe(`${base}/#/connect/workspace/${workspaceId}/${ownerId}?disable_tips=1`);
    await expectState(page, 'connected');
    await desktopRendered(page);

    // Another tab (no sessionStorage of its own) with the JWT-free address says clearly what to do.
    const other = await open(`/#/connect/workspace/${workspaceId}/${ownerId}`);
    await expectState(other, 'error');
    expect(await other.locator('h1').innerText()).toBe('This link is no longer valid');
    expect(await other.locator('#page').innerText()).toContain('Open the link you were given again');
  });

  it('a joiner sees the same desktop view-only: only the owner\'s typing reaches it', async () => {
    const joined = await api.call('join_workspace', key, { share_id: shareId });
    expect(joined.status).toBe(200);
    expect(joined.body.workspace_url).toMatch(new RegExp(`^/#/connect/join/${shareId}/${joined.body.user_id}/[^/?]+$`));

    const owner = await open(`${ownerUrl}?disable_tips=1`);
    const viewer = await open(`${joined.body.workspace_url}?disable_tips=1`);
    await expectState(owner, 'connected');
    await expectState(viewer, 'connected');
    expect(await viewer.evaluate(() => (window as unknown as { __rfb?: { viewOnly: boolean } }).__rfb?.viewOnly)).toBe(true);
    // The badge stays on screen (on the panel's tab) while the panel is folded away.
    const badge = await viewer.locator('#view-only-badge').boundingBox();
    expect(badge && badge.y >= 0 && badge.height > 0).toBe(true);
    const ownerSample = await desktopRendered(owner);
    const viewerSample = await desktopRendered(viewer);
    expect(viewerSample.box).toEqual(ownerSample.box);

    expect(await fileExists('/tmp/viewer-was-here')).toBe(false);
    expect(await fileExists('/tmp/owner-was-here')).toBe(false);
    // The viewer types first; then the owner. Once the owner's command has run, the viewer's would have too.
    await typeIntoXterm(viewer, viewerSample, 'touch /tmp/viewer-was-here');
    await typeIntoXterm(owner, ownerSample, 'touch /tmp/owner-was-here');
    await waitFor('the owner\'s command to run in the workspace', async () => ((await fileExists('/tmp/owner-was-here')) ? true : undefined), 30_000, 250);
    expect(await fileExists('/tmp/viewer-was-here')).toBe(false);

    // Both still see the desktop, now with the owner's command on it.
    await desktopRendered(viewer);
    await viewer.screenshot({ path: join(RESULTS, 'browser-client-viewer.png') });
    expect(await stateOf(owner)).toBe('connected');
    expect(await stateOf(viewer)).toBe('connected');

    // The server enforces it too: a viewer whose page lifts noVNC's view-only flag still cannot type.
    await viewer.evaluate(() => { (window as unknown as { __rfb: { viewOnly: boolean } }).__rfb.viewOnly = false; });
    await typeIntoXterm(viewer, viewerSample, 'touch /tmp/viewer-forced-here');
    await typeIntoXterm(owner, ownerSample, 'touch /tmp/owner-again');
    await waitFor('the owner\'s second command to run in the workspace', async () => ((await fileExists('/tmp/owner-again')) ? true : undefined), 30_000, 250);
    expect(await fileExists('/tmp/viewer-forced-here')).toBe(false);
  });

  it('shows clear pages for bad links, and honours disable_control_panel and disable_tips', async () => {
    // A link whose JWT is not valid.
    const bad = await open(`/#/connect/workspace/${workspaceId}/${ownerId}/not-a-valid-jwt`);
    await expectState(bad, 'error');
    expect(await bad.locator('h1').innerText()).toBe('This link is no longer valid');
    expect(await bad.locator('#page').innerText()).toContain('Ask for a new link.');

    // Anything else is the neutral landing page.
    const landing = await open('/#/somewhere/else');
    await expectState(landing, 'landing');
    expect(await landing.locator('h1').innerText()).toBe('workspace-server');

    // Tips are shown on connect unless disable_tips=1; the control panel exists unless disable_control_panel=1.
    const plain = await open(ownerUrl);
    await expectState(plain, 'connected');
    expect(await plain.locator('#control-panel').count()).toBe(1);
    expect(await plain.locator('#disconnect-button').count()).toBe(1);
    expect(await plain.locator('#tips-dialog').isVisible()).toBe(true);
    await plain.locator('#tips-dialog button').click();
    expect(await plain.locator('#tips-dialog').count()).toBe(0);

    // The arguments work after the hash route and in the query string.
    const bare = await open(`${ownerUrl}?disable_control_panel=1&disable_tips=1`);
    await expectState(bare, 'connected');
    expect(await bare.locator('#control-panel').count()).toBe(0);
    expect(await bare.locator('#tips-dialog').count()).toBe(0);
    const bareSearch = await open(`/?disable_control_panel=1&disable_fixed_res=1${ownerUrl.slice(1)}`);
    await expectState(bareSearch, 'connected');
    expect(await bareSearch.locator('#control-panel').count()).toBe(0);
    expect(await bareSearch.locator('#tips-dialog').count()).toBe(1);
    // disable_fixed_res=1: the owner asks the server to follow the window's size (scaling stays as the fallback).
    expect(await bareSearch.evaluate(() => (window as unknown as { __rfb?: { resizeSession: boolean; scaleViewport: boolean } }).__rfb?.resizeSession)).toBe(true);

    // Disconnect from the control panel (it slides down from the top edge under the pointer), then reconnect.
    await plain.locator('#control-panel .handle').hover();
    await plain.locator('#disconnect-button').click();
    // The page was connected when the click landed; wait for the disconnect itself before judging the state.
    await plain.waitForFunction(() => document.body.dataset.state !== 'connected', null, { timeout: 30_000, polling: 50 });
    await expectState(plain, 'disconnected');
    await plain.getByRole('button', { name: 'Reconnect' }).click();
    await expectState(plain, 'connected');
  });

  it('the gateway\'s idle disconnect shows why the desktop went away', async () => {
    await api.app.get(GroupsService).updateSettings('All Users', { clientSettings: { idle_disconnect: 2 } });
    try {
      const page = await open(`${ownerUrl}?disable_tips=1`);
      await expectState(page, 'connected');
      // No pointer or key input from this page: the gateway closes the stream after 2 "minutes" (2 s here).
      await page.waitForFunction(() => document.body.dataset.state !== 'connected', null, { timeout: 30_000, polling: 50 });
      await expectState(page, 'disconnected');
      expect(await page.evaluate(() => document.getElementById('page')?.innerText ?? '')).toContain('You were disconnected after 2 minutes without activity.');
    } finally {
      await api.app.get(GroupsService).updateSettings('All Users', { clientSettings: { idle_disconnect: 0 } });
    }
  });
});
