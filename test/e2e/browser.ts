import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Browser, chromium, Page, Request } from 'playwright-core';
import type { AppConfig } from '@ws/common';
import { desktopImage, TestApi, waitFor } from './harness';

/**
 * Installs Debian's Chromium builds if missing (scripts/ensure-browser.sh). Call it before any worker runs: it blocks this
 * process, which would cost the workers their job locks.
 */
export function ensureChromium(): void {
  execFileSync('bash', ['scripts/ensure-browser.sh'], { cwd: join(__dirname, '..', '..'), stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * Debian's Chromium builds (scripts/ensure-browser.sh installs both): `shell`, the headless shell, which Playwright
 * itself runs for headless tests and which took ~40 % less CPU than the full browser in headless mode for the same
 * browser suites (their pages are the same Blink and V8); `full`, the browser as people run it, which the benches
 * measure in.
 */
export const CHROMIUM_BINARIES = { shell: '/usr/bin/chromium-headless-shell', full: '/usr/bin/chromium' } as const;

/** A Chromium build (the headless shell unless told), headless, with what a sandboxed CI box needs, and `extraArgs`. */
export function launchChromium(extraArgs: string[] = [], build: keyof typeof CHROMIUM_BINARIES = 'shell'): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_BINARIES[build],
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run', ...extraArgs],
  });
}

/** A request's address for a log: path parts of 40 characters or more (a link's JWT) shown as `…`. */
export const shownUrl = (url: string): string => url.replace(/\/[^/]{40,}/g, '/…');

/**
 * Opens a page of the browser client and waits until its modules ran (`<html data-app="ready">`). `to` is its
 * address, or the way there: `{ from, click }` opens the page `from` and clicks the link `click` (a selector) on it,
 * so the client sees that page as its referrer. Chromium aborts loads in flight when the host's network changes
 * (net::ERR_NETWORK_CHANGED: Docker adding a container's veth on this machine, which a user's browser does not
 * share), so a page whose modules were cut off is opened once more the same way; nothing ran in it (a module graph
 * runs whole or not at all). `log` goes into the error.
 */
export async function openClientPage(page: Page, to: string | { from: string; click: string }, log: string[] = []): Promise<void> {
  const failed: string[] = [];
  const onFailed = (r: Request) => ['document', 'script'].includes(r.resourceType()) && failed.push(`${shownUrl(r.url())} ${r.failure()?.errorText ?? ''}`);
  page.on('requestfailed', onFailed);
  try {
    const navigate = async () => {
      if (typeof to !== 'string') {
        await page.goto(to.from);
        await page.click(to.click);
      } else if (page.url() === to) {
        await page.reload(); // a second load of the same address with a fragment would only scroll
      } else {
        await page.goto(to);
      }
    };
    // A load cut off by the network change fails with net::ERR_…, or, when Chromium shows its error page first, as a
    // navigation "interrupted by another navigation to chrome-error://chromewebdata/".
    const load = () => navigate().catch((err: Error) => {
      if (!/net::ERR_|interrupted by another navigation to "chrome-error:/.test(err.message)) throw err;
      failed.push(err.message.split('\n')[0]);
    });
    await load();
    // Loaded again only when the page or a script of it failed to load: a slow page that still starts must not run
    // (and call the api) twice.
    const started = () => waitFor('the client to start or a load to fail', async () => {
      // A page on its way to the client (after a click) may lose its context under the evaluation: not yet, then.
      if (await page.evaluate(() => document.documentElement.dataset.app === 'ready').catch(() => false)) return true;
      return failed.length ? false : undefined;
    }, 60_000, 100).catch(() => false);
    if (await started()) return;
    log.push(`client modules did not run (${failed.join('; ') || 'no failed request'}); reloading once`);
    failed.length = 0;
    await load();
    if (!(await started())) throw new Error(`the client did not start\n${log.join('\n')}`);
  } finally {
    page.off('requestfailed', onFailed);
  }
}

/**
 * The start of a browser suite: chromium and the desktop image ready (both may block this process, so before any
 * worker runs), then an api listening on its own url, with its queue workers.
 */
export async function startBrowserSuiteApi(overrides: Partial<AppConfig> = {}): Promise<{ api: TestApi; base: string; imageName: string }> {
  ensureChromium();
  const imageName = desktopImage();
  const api = await TestApi.start({ WORKER_LOCK_MS: 3000, ...overrides });
  const base = await api.listen();
  await api.startWorker();
  return { api, base, imageName };
}
