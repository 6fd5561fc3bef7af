/**
 * In-session files from the browser client's control panel, in Debian's chromium against a live api and
 * workspace: a file chosen in the Files drawer lands in ~/Uploads, and one from the Downloads list arrives with
 * the same bytes (Playwright's download event).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { localDocker, TestApi, TestKey } from './harness';
import { registerLocalServer, waitForRunningWorkspace } from './fixtures';
import { launchChromium, startBrowserSuiteApi } from './browser';

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('files in the browser client (chromium)', () => {
  let api: TestApi;
  let key: TestKey;
  let admin: TestKey;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let ownerId: string;
  let workspaceId: string;
  let containerId: string;
  const log: string[] = [];

  beforeAll(async () => {
    const started = await startBrowserSuiteApi();
    ({ api, base } = started);
    const imageName = started.imageName;
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: imageName, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600 });
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    ownerId = (await api.call('create_user', admin, { target_user: { username: 'files-browser-owner' } })).body.user.user_id;
    workspaceId = (await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id })).body.workspace_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId, 200);
    containerId = running.workspace.container_id;

    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1024, height: 768 }, acceptDownloads: true });
    page = await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') log.push(`console.error: ${m.text()}`); });
    page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
    await page.goto(base + running.workspace_url);
    // Chromium may abort the first load when Docker changes the host's network: reload once if the client did not start.
    const ready = () => page.waitForFunction(() => document.documentElement.dataset.app === 'ready', null, { timeout: 10_000 }).then(() => true, () => false);
    if (!(await ready())) {
      await page.reload();
      if (!(await ready())) throw new Error(`the client did not start\n${log.join('\n')}`);
    }
    await page.waitForFunction(() => document.body.dataset.state === 'connected', null, { timeout: 60_000, polling: 100 })
      .catch(async () => { throw new Error(`not connected: ${await page.evaluate(() => document.body.innerText)}\n${log.join('\n')}`); });
    await page.waitForSelector('#files-button', { state: 'attached', timeout: 10_000 });
  }, 600_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    await api?.close();
  });

  async function sh(cmd: string): Promise<string> {
    const result = await localDocker().exec(containerId, { cmd, timeoutMs: 30_000 });
    if (result.exitCode !== 0) throw new Error(`${cmd}: exit ${result.exitCode}: ${result.stderr}`);
    return result.stdout;
  }

  async function openFiles(): Promise<void> {
    if ((await page.getAttribute('#files-button', 'aria-expanded')) === 'true') return;
    // The panel slides down from the top edge under the pointer, as a user reaches it.
    await page.locator('#control-panel .handle').hover();
    await page.click('#files-button');
    await page.waitForSelector('#files-drawer', { state: 'visible', timeout: 10_000 });
  }

  it('uploads a file chosen in the control panel into ~/Uploads, with progress and the saved name', async () => {
    await openFiles();
    const data = randomBytes(2 * 1024 * 1024 + 5);
    await page.setInputFiles('#upload-input', { name: 'from browser.bin', mimeType: 'application/octet-stream', buffer: data });
    const item = page.locator('#upload-transfers li[data-name="from browser.bin"]');
    await item.waitFor({ timeout: 10_000 });
    await page.waitForFunction(() => document.querySelector('#upload-transfers li')?.getAttribute('data-state') !== null, null, { timeout: 60_000, polling: 100 });
    expect([await item.getAttribute('data-state'), await item.locator('.transfer-status').innerText()]).toEqual(['done', 'Saved as ~/Uploads/from browser.bin']);
    expect(await item.locator('progress').evaluate((p) => (p as HTMLProgressElement).value)).toBe(100);
    expect((await sh('sha256sum "$HOME/Uploads/from browser.bin"')).split(' ')[0]).toBe(sha256(data));
  });

  it('lists ~/Downloads and downloads a file with the same bytes', async () => {
    await sh('mkdir -p "$HOME/Downloads" && head -c 1500000 /dev/urandom > "$HOME/Downloads/result.dat"');
    const expected = (await sh('sha256sum "$HOME/Downloads/result.dat"')).split(' ')[0];
    await openFiles();
    await page.click('#downloads-refresh');
    const link = page.locator('#downloads-list a', { hasText: 'result.dat' });
    await link.waitFor({ timeout: 15_000 });
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 30_000 }), link.click()]);
    expect(download.suggestedFilename()).toBe('result.dat');
    const path = await download.path();
    expect(await download.failure()).toBeNull();
    expect(sha256(readFileSync(path as string))).toBe(expected);
  });

  it('takes files dropped on the desktop', async () => {
    await page.evaluate(() => {
      const transfer = new DataTransfer();
      transfer.items.add(new File(['dropped bytes'], 'dropped.txt', { type: 'text/plain' }));
      const target = document.getElementById('screen') as HTMLElement;
      for (const type of ['dragenter', 'dragover', 'drop']) target.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: transfer }));
    });
    const item = page.locator('#upload-transfers li[data-name="dropped.txt"]');
    await item.waitFor({ timeout: 10_000 });
    await page.waitForFunction(() => document.querySelector('#upload-transfers li[data-name="dropped.txt"]')?.getAttribute('data-state') !== null, null, { timeout: 60_000, polling: 100 });
    expect(await item.getAttribute('data-state')).toBe('done');
    expect(await sh('cat "$HOME/Uploads/dropped.txt"')).toBe('dropped bytes');
  });

  it('shows no Files drawer when the settings allow neither uploads nor downloads', async () => {
    const groups = api.app.get(GroupsService);
    await groups.updateSettings('All Users', { clientSettings: { allow_workspace_uploads: false, allow_workspace_downloads: false } });
    try {
      await page.reload();
      await page.waitForFunction(() => document.body.dataset.state === 'connected', null, { timeout: 60_000, polling: 100 });
      await page.waitForSelector('#control-panel', { state: 'attached', timeout: 10_000 });
      expect(await page.locator('#files-button').count()).toBe(0);
      expect(await page.locator('#upload-input').count()).toBe(0);
    } finally {
      await groups.updateSettings('All Users', { clientSettings: { allow_workspace_uploads: true, allow_workspace_downloads: true } });
    }
  });
});
