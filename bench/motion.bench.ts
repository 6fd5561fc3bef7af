/**
 * Issue 25 benchmark: the reference desktop under motion, with each of its two VNC servers (start-desktop's
 * WS_VNC_SERVER: TigerVNC's Xvnc and Xvfb + x11vnc), launched through the service and watched through the
 * gateway by headless Chromium running the real browser client. Each figure is printed per server and as the
 * ratio xvnc / x11vnc, both measured in the same run, alternating which server goes first.
 *
 * Per launch: request → the xterm on the page (first content); idle CPU and memory of the desktop with the page
 * connected; then the image's standard moving workload (/usr/local/bin/workspace-motion, started by docker exec:
 * a window moved and a region redrawn at 60 Hz plus a scrolling terminal) for BENCH_MOTION_SECONDS, measuring
 *  - frames per second delivered to the canvas: calls of noVNC's Display.flip() that copy damaged pixels to
 *    the visible canvas (one per FramebufferUpdate, after its rectangles are drawn), hooked in the page;
 *  - bytes per second received on the page's stream websocket (counted in the page);
 *  - CPU of the workspace container (its cgroup's cpuacct) and of the bench process, which runs the api (with
 *    the gateway) and the worker in-process (Playwright's driver idles meanwhile: all counting is in the page);
 * and, with the workload still running, input-to-pixel latency: BENCH_MOTION_KEYS keys typed into the first
 * xterm through the page (x and Backspace in turn), each from the page's keydown until the flip whose canvas
 * shows a change in the xterm's area (a hash of its pixels, checked at every flip).
 * Knobs: BENCH_MOTION_ROUNDS (2), BENCH_MOTION_SECONDS (15), BENCH_MOTION_KEYS (60), BENCH_MOTION_IDLE_SECONDS (10).
 */
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../test/e2e/browser';
import { BenchAuth, desktopImage, post, registerLocalDesktop, startBenchApi, until } from './harness';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.BENCH_MOTION_ROUNDS ?? 2);
const MOTION_SECONDS = Number(process.env.BENCH_MOTION_SECONDS ?? 15);
const KEYS = Math.max(50, Number(process.env.BENCH_MOTION_KEYS ?? 60));
const IDLE_SECONDS = Number(process.env.BENCH_MOTION_IDLE_SECONDS ?? 10);
const SERVERS = ['xvnc', 'x11vnc'] as const;
type VncServer = (typeof SERVERS)[number];
const X_RES = 1280;
const Y_RES = 720;
const CORES = 1;
const MEMORY_MB = 1024;
// Generous: on a loaded host openbox and the first xterm alone have taken over a minute.
const TIMEOUT_MS = 180_000;
const KEY_TIMEOUT_MS = 5_000;
/** The first xterm's text area on the screen (100x30 at +40+40 under openbox's title bar): where keys echo. */
const ECHO_AREA = { x: 46, y: 66, width: 590, height: 370 };
/** Untouched by the workload (workspace-motion keeps the top left still). */
const ECHO_CLICK = { x: 300, y: 250 };

interface Launch {
  server: VncServer;
  firstContentMs: number;
  idleCpuPercent: number;
  /** Resident memory of the VNC server's processes (Xvnc, or Xvfb + x11vnc) while idle. */
  idleServerRssMiB: number;
  /** The whole container's memory use while idle (cgroup). */
  idleContainerMiB: number;
  fps: number;
  bytesPerSecond: number;
  containerCpuPercent: number;
  apiCpuPercent: number;
  latenciesMs: number[];
  lostKeys: number;
}

/** Counters the page keeps (installed before any of its scripts run). */
interface PageCounters {
  flips: number;
  streamBytes: number;
  pendingKey: { at: number; hash: number } | null;
  latencies: number[];
}

/**
 * Runs in the page before its scripts: counts bytes on the first websocket the page opens (the stream; audio
 * sockets come later), and hooks the Display of the RFB object the client publishes as window.__rfb.
 */
function instrumentPage(echo: { x: number; y: number; width: number; height: number }): void {
  const counters: PageCounters = { flips: 0, streamBytes: 0, pendingKey: null, latencies: [] };
  (window as unknown as { __motion: PageCounters }).__motion = counters;
  // The page's own WebSocket objects (noVNC checks the channel's prototype), counted from the constructor.
  const NativeWebSocket = window.WebSocket;
  let sockets = 0;
  const CountingWebSocket = function (url: string | URL, protocols?: string | string[]): WebSocket {
    const socket = new NativeWebSocket(url, protocols);
    if (sockets++ === 0) {
      socket.addEventListener('message', (event: MessageEvent) => {
        const data = event.data as ArrayBuffer | Blob | string;
        counters.streamBytes += typeof data === 'string' ? data.length : data instanceof ArrayBuffer ? data.byteLength : data.size;
      });
    }
    return socket;
  };
  CountingWebSocket.prototype = NativeWebSocket.prototype;
  Object.setPrototypeOf(CountingWebSocket, NativeWebSocket); // CONNECTING, OPEN, ...
  window.WebSocket = CountingWebSocket as unknown as typeof WebSocket;
  const echoHash = (canvas: HTMLCanvasElement): number => {
    const pixels = new Uint32Array(canvas.getContext('2d')!.getImageData(echo.x, echo.y, echo.width, echo.height).data.buffer);
    let hash = 0;
    for (let i = 0; i < pixels.length; i++) hash = (Math.imul(hash, 31) + pixels[i]) | 0;
    return hash;
  };
  interface NoVncDisplay {
    flip(fromQueue?: boolean): void;
    _renderQ: unknown[];
    _damageBounds: { left: number; top: number; right: number; bottom: number };
    _target: HTMLCanvasElement;
  }
  const hook = (display: NoVncDisplay) => {
    const flip = display.flip.bind(display);
    display.flip = (fromQueue?: boolean) => {
      // A flip with rectangles still queued is itself queued; it draws when the queue calls it again.
      const drawsNow = fromQueue === true || display._renderQ.length === 0;
      const damage = display._damageBounds;
      const damaged = damage.right > damage.left && damage.bottom > damage.top;
      flip(fromQueue);
      if (!drawsNow || !damaged) return;
      counters.flips++;
      const pending = counters.pendingKey;
      if (pending && echoHash(display._target) !== pending.hash) {
        counters.latencies.push(performance.now() - pending.at);
        counters.pendingKey = null;
      }
    };
    window.addEventListener('keydown', () => {
      counters.pendingKey = { at: performance.now(), hash: echoHash(display._target) };
    }, { capture: true });
  };
  let rfb: { _display: NoVncDisplay } | null = null;
  Object.defineProperty(window, '__rfb', {
    configurable: true,
    get: () => rfb,
    set: (value: { _display: NoVncDisplay } | null) => {
      rfb = value;
      if (value) hook(value._display);
    },
  });
}

/** The reference desktop's xterm (white, at +40+40) on its blue background, in the page's canvas. */
function canvasShowsXterm(size: { width: number; height: number }): boolean {
  const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas');
  if (!canvas || canvas.width !== size.width) return false;
  const ctx = canvas.getContext('2d')!;
  const isWhite = (d: Uint8ClampedArray) => d[0] >= 245 && d[1] >= 245 && d[2] >= 245;
  const xterm = ctx.getImageData(100, 100, 300, 200).data;
  let white = 0;
  for (let i = 0; i < xterm.length; i += 64) if (isWhite(xterm.subarray(i, i + 4))) white++;
  const corner = ctx.getImageData(size.width - 60, size.height - 60, 1, 1).data;
  return white / (xterm.length / 64) > 0.9 && Math.abs(corner[0] - 0x2e) <= 4 && Math.abs(corner[2] - 0x87) <= 4;
}

function docker(...args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8' }).trim();
}

/** CPU time (ns) and memory in use (bytes) of a container's cgroup, cgroup v1 (cgroupfs) or v2. */
function containerUsage(id: string): { cpuNs: number; memoryBytes: number } {
  const v1 = `/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`;
  if (existsSync(v1)) {
    return { cpuNs: Number(readFileSync(v1, 'utf8')), memoryBytes: Number(readFileSync(`/sys/fs/cgroup/memory/docker/${id}/memory.usage_in_bytes`, 'utf8')) };
  }
  const dir = [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`].find((d) => existsSync(d));
  if (!dir) throw new Error(`no cgroup found for container ${id}`);
  const usec = /usage_usec (\d+)/.exec(readFileSync(`${dir}/cpu.stat`, 'utf8'))?.[1];
  return { cpuNs: Number(usec) * 1000, memoryBytes: Number(readFileSync(`${dir}/memory.current`, 'utf8')) };
}

/** Resident memory (MiB) of the container's processes named `names`, from their /proc/<pid>/stat. */
function processRssMiB(id: string, names: string[]): number {
  const PAGE = 4096;
  const stats = docker('exec', id, 'sh', '-c', 'cat /proc/[0-9]*/stat 2>/dev/null || true').split('\n');
  let pages = 0;
  for (const line of stats) {
    const comm = /\((.*)\)/.exec(line)?.[1];
    if (!comm || !names.includes(comm)) continue;
    pages += Number(line.slice(line.lastIndexOf(')') + 2).split(' ')[21]);
  }
  return (pages * PAGE) / 1024 ** 2;
}

const SERVER_PROCESSES: Record<VncServer, string[]> = { xvnc: ['Xvnc'], x11vnc: ['Xvfb', 'x11vnc'] };

const counters = (page: Page) => page.evaluate(() => {
  const c = (window as unknown as { __motion: PageCounters }).__motion;
  return { flips: c.flips, streamBytes: c.streamBytes, at: performance.now() };
});

/** Waits until the page's canvas has had no update for `quietMs` (bounded). */
async function untilQuiet(page: Page, quietMs: number): Promise<void> {
  let last = await counters(page);
  let quietSince = Date.now();
  await until('the desktop to settle', async () => {
    const now = await counters(page);
    if (now.flips !== last.flips) {
      last = now;
      quietSince = Date.now();
    }
    return Date.now() - quietSince >= quietMs ? true : undefined;
  }, TIMEOUT_MS);
}

/** Over `seconds`: the container's CPU (% of one core) and this process's (the api's) CPU, and `during` run meanwhile. */
async function cpuOver<T>(containerId: string, seconds: number, during: () => Promise<T>): Promise<{ containerCpuPercent: number; apiCpuPercent: number; result: T }> {
  const containerBefore = containerUsage(containerId).cpuNs;
  const apiBefore = process.cpuUsage();
  const start = performance.now();
  const result = await during();
  const remaining = seconds * 1000 - (performance.now() - start);
  if (remaining > 0) await new Promise((r) => setTimeout(r, remaining));
  const wallMs = performance.now() - start;
  const api = process.cpuUsage(apiBefore);
  return {
    containerCpuPercent: ((containerUsage(containerId).cpuNs - containerBefore) / 1e6 / wallMs) * 100,
    apiCpuPercent: ((api.user + api.system) / 1000 / wallMs) * 100,
    result,
  };
}

/** Clicks the page's canvas at a point of the remote screen (the canvas is scaled to the page). */
async function clickScreen(page: Page, point: { x: number; y: number }): Promise<void> {
  const at = await page.evaluate(({ x, y }) => {
    const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas')!;
    const box = canvas.getBoundingClientRect();
    return { x: box.left + (x * box.width) / canvas.width, y: box.top + (y * box.height) / canvas.height };
  }, point);
  await page.mouse.click(at.x, at.y);
}

/** Types KEYS keys into the focused xterm, one at a time, each once the previous one's echo was drawn. */
async function typeAndTime(page: Page): Promise<{ latencies: number[]; lost: number }> {
  let lost = 0;
  for (let i = 0; i < KEYS; i++) {
    await page.keyboard.press(i % 2 === 0 ? 'x' : 'Backspace');
    const echoed = await page.waitForFunction(() => (window as unknown as { __motion: PageCounters }).__motion.pendingKey === null, null, { timeout: KEY_TIMEOUT_MS, polling: 10 })
      .then(() => true, () => false);
    if (!echoed) {
      lost++;
      await page.evaluate(() => void ((window as unknown as { __motion: PageCounters }).__motion.pendingKey = null));
    }
  }
  const latencies = await page.evaluate(() => (window as unknown as { __motion: PageCounters }).__motion.latencies);
  return { latencies, lost };
}

async function launch(browser: Browser, base: string, auth: BenchAuth, imageId: string, server: VncServer, round: number): Promise<Launch> {
  const user = (await post(base, 'create_user', { ...auth, target_user: { username: `motion-${server}-${round}` } })).user as { user_id: string };
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, bypassCSP: true });
  await context.addInitScript(instrumentPage, ECHO_AREA);
  const start = performance.now();
  const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: imageId, environment: { WS_VNC_SERVER: server } });
  if (typeof requested.workspace_url !== 'string') throw new Error(`request_workspace: ${JSON.stringify(requested)}`);
  try {
    const page = await context.newPage();
    await page.goto(`${base}${requested.workspace_url}?disable_tips=1&disable_control_panel=1`);
    await page.waitForFunction(canvasShowsXterm, { width: X_RES, height: Y_RES }, { timeout: TIMEOUT_MS, polling: 50 }).catch(async (err: Error) => {
      const seen = await page.evaluate(() => ({ state: document.body.dataset.state, canvas: document.querySelector<HTMLCanvasElement>('#screen canvas')?.width }));
      await page.screenshot({ path: `/tmp/motion-${server}-${round}.png` }).catch(() => undefined);
      throw new Error(`${server}: no xterm on the page (${JSON.stringify(seen)}, /tmp/motion-${server}-${round}.png): ${err.message}`);
    });
    const firstContentMs = performance.now() - start;
    const status = await post(base, 'get_workspace_status', { ...auth, workspace_id: requested.workspace_id, user_id: user.user_id });
    const shortId = (status.workspace as { container_id?: string } | undefined)?.container_id;
    if (!shortId) throw new Error(`no container for the workspace: ${JSON.stringify(status)}`);
    const containerId = docker('inspect', '--format', '{{.Id}}', shortId);

    await untilQuiet(page, 1000);
    const idle = await cpuOver(containerId, IDLE_SECONDS, async () => undefined);
    const idleServerRssMiB = processRssMiB(containerId, SERVER_PROCESSES[server]);
    const idleContainerMiB = containerUsage(containerId).memoryBytes / 1024 ** 2;

    // The workload outlives the measurement and the typing; the workspace's destroy ends it.
    docker('exec', '-d', containerId, 'workspace-motion', String(MOTION_SECONDS + 120));
    const before = await counters(page);
    await until('the workload on the canvas', async () => ((await counters(page)).flips - before.flips > 60 ? true : undefined), TIMEOUT_MS).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify({ before, now: await counters(page) })}; in the container: ${docker('exec', containerId, 'ps', '-eo', 'comm')}`);
    });
    await clickScreen(page, ECHO_CLICK); // openbox focused the workload's terminal; the person clicks the xterm
    const motion = await cpuOver(containerId, MOTION_SECONDS, () => counters(page));
    const after = await counters(page);
    const seconds = (after.at - motion.result.at) / 1000;
    const typed = await typeAndTime(page);
    return {
      server, firstContentMs, idleCpuPercent: idle.containerCpuPercent, idleServerRssMiB, idleContainerMiB,
      fps: (after.flips - motion.result.flips) / seconds, bytesPerSecond: (after.streamBytes - motion.result.streamBytes) / seconds,
      containerCpuPercent: motion.containerCpuPercent, apiCpuPercent: motion.apiCpuPercent, latenciesMs: typed.latencies, lostKeys: typed.lost,
    };
  } finally {
    await context.close();
    await post(base, 'destroy_workspace', { ...auth, workspace_id: requested.workspace_id, user_id: user.user_id });
  }
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

function report(launches: Launch[]): void {
  const of = (server: VncServer) => launches.filter((l) => l.server === server);
  const figures: Array<[string, (ls: Launch[]) => number, number]> = [
    ['frames/s on the canvas (motion)', (ls) => mean(ls.map((l) => l.fps)), 1],
    ['websocket KiB/s (motion)', (ls) => mean(ls.map((l) => l.bytesPerSecond)) / 1024, 0],
    ['KiB per frame (motion)', (ls) => mean(ls.map((l) => l.bytesPerSecond / l.fps)) / 1024, 1],
    ['container CPU % of a core (motion)', (ls) => mean(ls.map((l) => l.containerCpuPercent)), 1],
    ['api process CPU % (motion)', (ls) => mean(ls.map((l) => l.apiCpuPercent)), 1],
    ['key → echo on canvas p50 ms (motion)', (ls) => median(ls.flatMap((l) => l.latenciesMs)), 1],
    ['key → echo on canvas p95 ms (motion)', (ls) => percentile(ls.flatMap((l) => l.latenciesMs), 95), 1],
    ['request → xterm on the page p50 ms', (ls) => median(ls.map((l) => l.firstContentMs)), 0],
    ['container CPU % of a core (idle)', (ls) => mean(ls.map((l) => l.idleCpuPercent)), 2],
    ['VNC server RSS MiB (idle)', (ls) => mean(ls.map((l) => l.idleServerRssMiB)), 1],
    ['container memory MiB (idle, cgroup)', (ls) => mean(ls.map((l) => l.idleContainerMiB)), 1],
  ];
  console.log(`\nmotion bench (${X_RES}x${Y_RES}, ${CORES} core, ${ROUNDS} launches per server, ${MOTION_SECONDS} s of motion, ${KEYS} keys each)`);
  console.log(`${''.padEnd(40)}${'xvnc'.padStart(10)}${'x11vnc'.padStart(10)}   xvnc / x11vnc`);
  for (const [label, figure, digits] of figures) {
    const xvnc = figure(of('xvnc'));
    const x11vnc = figure(of('x11vnc'));
    console.log(`${label.padEnd(40)}${xvnc.toFixed(digits).padStart(10)}${x11vnc.toFixed(digits).padStart(10)}   ${(xvnc / x11vnc).toFixed(2)}`);
  }
  for (const server of SERVERS) {
    const keys = of(server).flatMap((l) => l.latenciesMs).length;
    const lost = of(server).reduce((n, l) => n + l.lostKeys, 0);
    console.log(`${server}: ${keys} keys timed, ${lost} without an echo within ${KEY_TIMEOUT_MS} ms`);
  }
}

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi({ worker: true, kind: 'motion' });
  let browser: Browser | undefined;
  try {
    browser = await launchChromium([], 'full');
    const { image: img, auth } = await registerLocalDesktop(bench.api, {
      name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2, xRes: X_RES, yRes: Y_RES, portMap: { vnc: '5900/tcp' },
    });
    const launches: Launch[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? SERVERS : [...SERVERS].reverse();
      for (const server of order) {
        const result = await launch(browser, bench.base, auth, img.id, server, round);
        console.log(`${server} round ${round}: ${result.fps.toFixed(1)} frames/s, ${(result.bytesPerSecond / 1024).toFixed(0)} KiB/s, container ${result.containerCpuPercent.toFixed(0)} %, key p50 ${median(result.latenciesMs).toFixed(0)} ms`);
        launches.push(result);
      }
    }
    report(launches);
  } finally {
    await browser?.close();
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
