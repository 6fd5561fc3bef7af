import { Browser, chromium } from 'playwright-core';

/** Debian's chromium (scripts/ensure-browser.sh installs it), headless, with what a sandboxed CI box needs. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'],
  });
}
