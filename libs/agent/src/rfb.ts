import * as net from 'node:net';
import { RfbTimeoutError } from './errors';

export interface WaitForRfbOptions {
  /** Overall bound (default 30 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Bound of a single connection attempt (default 2 s, never more than what is left of timeoutMs). */
  attemptTimeoutMs?: number;
}

const BANNER_LENGTH = 12;
const BANNER = /^RFB \d{3}\.\d{3}\n$/;
// Short on purpose: the wait for the banner is on every start's path, and an attempt is a loopback connection that
// docker-proxy refuses or closes at once; a longer pause only adds to the time a person waits for the desktop.
const FIRST_BACKOFF_MS = 10;
const MAX_BACKOFF_MS = 50;
const MAX_ATTEMPTS = 100_000;

/**
 * Resolves with the elapsed milliseconds once host:port sends the 12-byte RFB banner ("RFB 003.008\n").
 * Connection refused/reset/closed-before-banner (docker-proxy accepts before the desktop listens) is retried with
 * a pause of 10 ms doubling to 50 ms, until timeoutMs; then rejects with RfbTimeoutError. Nothing is sent to the
 * server: the socket is closed right after the banner.
 */
export async function waitForRfb(host: string, port: number, options: WaitForRfbOptions = {}): Promise<number> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const attemptTimeoutMs = options.attemptTimeoutMs ?? 2_000;
  if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new RangeError(`waitForRfb: invalid port ${String(port)}`);
  const started = performance.now();
  const deadline = started + timeoutMs;
  let backoff = FIRST_BACKOFF_MS;
  let attempts = 0;
  let lastError = 'no attempt made';
  while (attempts < MAX_ATTEMPTS) {
    throwIfAborted(options.signal);
    const remaining = deadline - performance.now();
    if (remaining <= 0) break;
    attempts++;
    const budget = Math.max(1, Math.min(attemptTimeoutMs, remaining));
    try {
      await probeBanner(host, port, budget, options.signal);
      return Math.round(performance.now() - started);
    } catch (err) {
      throwIfAborted(options.signal);
      // An attempt cut short by the overall deadline says less than the failure before it.
      const cutShort = err instanceof BannerTimeout && budget < attemptTimeoutMs && attempts > 1;
      if (!cutShort) lastError = err instanceof Error ? err.message : String(err);
    }
    const left = deadline - performance.now();
    if (left <= 0) break;
    await sleep(Math.min(backoff, left), options.signal);
    backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
  }
  throw new RfbTimeoutError(host, port, timeoutMs, attempts, lastError);
}

/** One connection: resolves when a valid banner arrives, rejects on anything else. */
export function probeBanner(host: string, port: number, timeoutMs: number, signal?: AbortSignal): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let settled = false;
    let received = Buffer.alloc(0);
    const socket = net.connect({ host, port });
    const finish = (err: Error | null, banner?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve(banner as string);
    };
    const onAbort = () => finish(abortReason(signal));
    const timer = setTimeout(() => finish(new BannerTimeout(`no banner within ${Math.round(timeoutMs)} ms`)), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < BANNER_LENGTH) return;
      const banner = received.subarray(0, BANNER_LENGTH).toString('latin1');
      if (BANNER.test(banner)) finish(null, banner.trimEnd());
      // Never the bytes themselves: this text can reach an operational_message.
      else finish(new Error(`the first ${BANNER_LENGTH} bytes are not an RFB banner`));
    });
    socket.on('error', (err) => finish(err));
    socket.on('close', () => finish(new Error(`connection closed after ${received.length} bytes, before the RFB banner`)));
  });
}

class BannerTimeout extends Error {}

function abortReason(signal?: AbortSignal): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('waitForRfb aborted');
}

function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortReason(signal);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
