import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Browser, chromium } from 'playwright-core';
import type { AppConfig } from '@ws/common';
import { desktopImage, TestApi } from './harness';

/**
 * Installs Debian's chromium if missing (scripts/ensure-browser.sh). Call it before any worker runs: it blocks this
 * process, which would cost the workers their job locks.
 */
export function ensureChromium(): void {
  execFileSync('bash', ['scripts/ensure-browser.sh'], { cwd: join(__dirname, '..', '..'), stdio: ['ignore', 'inherit', 'inherit'] });
}

/** Debian's chromium (scripts/ensure-browser.sh installs it), headless, with what a sandboxed CI box needs, and `extraArgs`. */
export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run', ...extraArgs],
  });
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
