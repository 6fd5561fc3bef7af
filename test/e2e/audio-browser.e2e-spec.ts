/**
 * Workspace audio in Debian's chromium: a tone played in the workspace makes the page's audio level non-zero
 * (the client's AnalyserNode), and Chromium's fake audio capture (a periodic beep), sent through the control
 * panel's microphone button, is recorded non-silent by the workspace.
 */
import { Browser, Page } from 'playwright-core';
import { GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { launchChromium, startBrowserSuiteApi } from './browser';
import { dockerExec, peak, playTone, stopTone, waitForSound } from './audio-fixtures';
import { TestApi, TestKey, waitFor } from './harness';
import { registerLocalServer, waitForRunningWorkspace } from './fixtures';


describe('workspace audio in the browser client', () => {
  let api: TestApi;
  let key: TestKey;
  let base: string;
  let browser: Browser;
  let ownerId: string;
  let workspaceId: string;
  let containerId: string;
  let ownerUrl: string;

  beforeAll(async () => {
    const started = await startBrowserSuiteApi();
    ({ api, base } = started);
    const imageName = started.imageName;
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({
      name: imageName, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2, xRes: 800, yRes: 600,
      portMap: { vnc: '5900/tcp', audio: '4901/tcp', audio_input: '4902/tcp' },
    });
    await api.app.get(GroupsService).updateSettings('All Users', { clientSettings: { allow_workspace_audio: true, workspace_audio_default_on: true, allow_workspace_microphone: true } });
    key = await api.key(['Users Auth Session', 'User']);
    const admin = await api.key(['Global Admin']);
    ownerId = (await api.call('create_user', admin, { target_user: { username: 'audio-browser-owner' } })).body.user.user_id;
    const requested = await api.call('request_workspace', key, { user_id: ownerId, image_id: image.id });
    expect(requested.status).toBe(200);
    workspaceId = requested.body.workspace_id;
    const running = await waitForRunningWorkspace(api, key, workspaceId, ownerId, 200);
    ownerUrl = running.workspace_url;
    containerId = running.workspace.container_id;
    await waitForSound(containerId);
    // A fake microphone (a beep), no permission prompt, and audio that starts without a click.
    browser = await launchChromium(['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream', '--autoplay-policy=no-user-gesture-required']);
  }, 600_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await api?.close();
  });

  async function openConnected(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    await context.grantPermissions(['microphone'], { origin: base });
    // When noVNC first handles a rectangle of pixels (window.__firstPixels), to hold the first-frame mark against.
    await context.addInitScript(() => {
      type Viewer = { _handleDataRect?: (...args: unknown[]) => boolean };
      const page = window as unknown as { __firstPixels?: number };
      let viewer: Viewer | undefined;
      Object.defineProperty(window, '__rfb', {
        configurable: true,
        get: () => viewer,
        set: (value: Viewer) => {
          viewer = value;
          const handle = value._handleDataRect;
          if (typeof handle !== 'function') return;
          value._handleDataRect = function (this: Viewer, ...args: unknown[]) {
            const handled = handle.apply(this, args);
            if (handled) page.__firstPixels ??= performance.now();
            return handled;
          };
        },
      });
    });
    const page = await context.newPage();
    const log: string[] = [];
    page.on('console', (m) => { if (m.type() === 'error') log.push(`console.error: ${m.text()}`); });
    page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
    await page.goto(base + ownerUrl);
    try {
      await page.waitForFunction(() => document.body.dataset.state === 'connected', null, { timeout: 60_000, polling: 100 });
    } catch (err) {
      throw new Error(`the client did not connect (state ${await page.evaluate(() => document.body.dataset.state)}): ${(err as Error).message}\n${log.join('\n')}`);
    }
    return page;
  }

  const audioLevel = (page: Page) => page.evaluate(() => (window as unknown as { __workspaceAudio?: { level(): number } }).__workspaceAudio?.level() ?? -1);

  it('a tone played in the workspace reaches the page (its audio level is non-zero); muting silences it', async () => {
    const page = await openConnected();
    try {
      // On by default (workspace_audio_default_on), once the first picture is drawn: the sound waits for it.
      await page.waitForFunction(() => document.getElementById('audio-button')?.textContent === 'Mute', null, { timeout: 15_000, polling: 50 });
      const firstFrame = await page.evaluate(() => ({
        marks: performance.getEntriesByName('client:first-frame').map((mark) => mark.startTime),
        pixels: (window as unknown as { __firstPixels?: number }).__firstPixels ?? null,
      }));
      expect(firstFrame.marks).toHaveLength(1);
      // The mark (and the sound after it) waits for an update with pixels, not the server's first pseudo-rectangles.
      expect(firstFrame.pixels).not.toBeNull();
      expect(firstFrame.marks[0]).toBeGreaterThanOrEqual(firstFrame.pixels as number);
      const tone = await playTone(containerId);
      try {
        const level = await waitFor('audio level', async () => {
          const value = await audioLevel(page);
          return value > 0.01 ? value : undefined;
        }, 30_000, 100);
        expect(level).toBeGreaterThan(0.01);
        await page.evaluate(() => document.getElementById('audio-button')?.click());
        expect(await page.evaluate(() => document.getElementById('audio-button')?.textContent)).toBe('Unmute');
        await waitFor('silence after muting', async () => ((await audioLevel(page)) < 0.001 ? true : undefined), 15_000, 100);
      } finally {
        await stopTone(containerId, tone);
      }
    } finally {
      await page.context().close();
    }
  });

  it('the fake microphone, switched on in the control panel, is recorded non-silent in the workspace', async () => {
    const page = await openConnected();
    try {
      await page.evaluate(() => document.getElementById('microphone-button')?.click());
      await waitFor('microphone input in the workspace', async () => ((await dockerExec(containerId, 'pactl list short sink-inputs')).toString().includes('protocol-native') ? true : undefined), 30_000, 200);
      // Chromium's fake capture beeps about once a second: 3 s of the default source hold a beep or more.
      const pcm = await dockerExec(containerId, 'timeout 3 parec --format=s16le --rate=48000 --channels=1 --raw --latency-msec=20; true');
      expect(pcm.length).toBeGreaterThan(48_000);
      expect(peak(pcm)).toBeGreaterThan(2000);
      expect(await page.evaluate(() => document.getElementById('microphone-button')?.textContent)).toBe('Microphone off');
    } finally {
      await page.context().close();
    }
  });
});
