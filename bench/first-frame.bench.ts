/**
 * Issue 8 benchmark: time from request_workspace until the person's view shows the desktop's first window: the
 * `workspace_url` opened in headless Chromium at once (the page polls until the workspace runs, then streams it
 * through the gateway with noVNC), until its canvas shows the xterm, not just the background. Baseline, in the
 * same run and interleaved: a bare `docker run` of the same image with the same limits, and a direct RFB client
 * that connects as soon as x11vnc answers and applies updates until the xterm is in its framebuffer.
 *
 * Launch variants are a list (`VARIANTS`): `on demand` (a fresh container) and `staged` (a desktop of a staging
 * pool claimed by the request; the pool is refilled outside the timed window).
 * Knobs: BENCH_FIRST_FRAME_ROUNDS (default 10).
 */
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { chromium, Browser } from 'playwright-core';
import { randomSecret } from '@ws/common';
import { ImagesService } from '@ws/images';
import { RfbClient, RfbFrame } from '@ws/stream';
import { BenchAuth, desktopImage, post, registerLocalDesktop, startBenchApi, until } from './harness';
import { percentile, median, row } from './stats';

const ROUNDS = Number(process.env.BENCH_FIRST_FRAME_ROUNDS ?? 10);
const X_RES = 800;
const Y_RES = 600;
const CORES = 1;
const MEMORY_MB = 512;
const CONTENT_TIMEOUT_MS = 60_000;
const BARE_LABEL = 'workspace-server.bench=first-frame';

/** What a launch variant gets: the api's address and an integrator's credentials. */
interface BenchContext {
  base: string;
  auth: BenchAuth;
  imageId: string;
  /** The same container image under a staging config (its own image row, so on-demand requests never claim it). */
  stagedImageId: string;
  stagingConfigId: string;
}

/** One way of handing a person a workspace: answers the link to open and how to clean up afterwards. */
interface FirstFrameVariant {
  name: string;
  /** Untimed, before the launch: e.g. wait until the staging pool has a desktop ready. */
  prepare?(ctx: BenchContext): Promise<void>;
  launch(ctx: BenchContext, round: number): Promise<{ workspaceUrl: string; release(): Promise<void> }>;
}

const VARIANTS: FirstFrameVariant[] = [
  {
    name: 'on demand',
    async launch(ctx, round) {
      const user = (await post(ctx.base, 'create_user', { ...ctx.auth, target_user: { username: `first-frame-${round}` } })).user as { user_id: string };
      const requested = await post(ctx.base, 'request_workspace', { ...ctx.auth, user_id: user.user_id, image_id: ctx.imageId });
      if (typeof requested.workspace_url !== 'string') throw new Error(`request_workspace: ${JSON.stringify(requested)}`);
      return {
        workspaceUrl: requested.workspace_url,
        release: async () => void (await post(ctx.base, 'destroy_workspace', { ...ctx.auth, workspace_id: requested.workspace_id, user_id: user.user_id })),
      };
    },
  },
  {
    name: 'staged',
    async prepare(ctx) {
      await until('a staged desktop ready', async () => {
        const got = await post(ctx.base, 'get_staging_config', { ...ctx.auth, target_staging_config: { staging_config_id: ctx.stagingConfigId } });
        return ((got.staging_config as { num_current_sessions?: number } | undefined)?.num_current_sessions ?? 0) > 0 ? true : undefined;
      }, 120_000);
    },
    async launch(ctx, round) {
      const user = (await post(ctx.base, 'create_user', { ...ctx.auth, target_user: { username: `first-frame-staged-${round}` } })).user as { user_id: string };
      const requested = await post(ctx.base, 'request_workspace', { ...ctx.auth, user_id: user.user_id, image_id: ctx.stagedImageId });
      if (requested.status !== 'running' || typeof requested.workspace_url !== 'string') throw new Error(`request_workspace was not served from staging: ${JSON.stringify(requested)}`);
      return {
        workspaceUrl: requested.workspace_url,
        release: async () => void (await post(ctx.base, 'destroy_workspace', { ...ctx.auth, workspace_id: requested.workspace_id, user_id: user.user_id })),
      };
    },
  },
];

/**
 * The reference desktop's xterm (white, at +40+40) on its blue background, in RGBA pixels. Self-contained: the
 * page evaluates its source too.
 */
function showsFirstWindow(data: Uint8Array | Uint8ClampedArray, width: number, height: number): boolean {
  let white = 0;
  let whiteTotal = 0;
  let background = 0;
  let backgroundTotal = 0;
  for (let y = 100; y < 300; y += 4) {
    for (let x = 100; x < 400; x += 4, whiteTotal++) {
      const i = (y * width + x) * 4;
      if (data[i] >= 245 && data[i + 1] >= 245 && data[i + 2] >= 245) white++;
    }
  }
  for (let y = height - 100; y < height - 10; y += 4) {
    for (let x = width - 100; x < width - 10; x += 4, backgroundTotal++) {
      const i = (y * width + x) * 4;
      if (Math.abs(data[i] - 0x2e) <= 4 && Math.abs(data[i + 1] - 0x5d) <= 4 && Math.abs(data[i + 2] - 0x87) <= 4) background++;
    }
  }
  return white / whiteTotal > 0.9 && background / backgroundTotal > 0.9;
}

function docker(...args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8' }).trim();
}

/** Baseline: bare docker run, then a direct RFB client from the moment x11vnc answers until the xterm is drawn. */
async function bareFirstWindow(image: string): Promise<number> {
  const password = randomSecret(8).slice(0, 8);
  const start = performance.now();
  const id = docker('run', '-d', '--rm', '--label', BARE_LABEL, '--cpus', String(CORES), '--memory', `${MEMORY_MB}m`,
    '-e', `X_RES=${X_RES}`, '-e', `Y_RES=${Y_RES}`, '-e', `VNC_PASSWORD=${password}`, '-p', '127.0.0.1::5900', image);
  try {
    const port = Number(docker('port', id, '5900/tcp').split('\n')[0].split(':').pop());
    const deadline = Date.now() + CONTENT_TIMEOUT_MS;
    let client: RfbClient | undefined;
    for (let attempt = 0; !client && Date.now() < deadline && attempt < 10_000; attempt++) {
      client = await RfbClient.connect('127.0.0.1', port, { password, timeoutMs: 2000 }).catch(async () => {
        await new Promise((r) => setTimeout(r, 25));
        return undefined;
      });
    }
    if (!client) throw new Error('the bare container never answered VNC');
    try {
      let frame: RfbFrame = await client.captureFrame({ timeoutMs: 15_000 });
      while (!showsFirstWindow(frame.data, frame.width, frame.height)) {
        if (Date.now() >= deadline) throw new Error('no xterm in the bare container');
        frame = (await client.update({ incremental: true, timeoutMs: deadline - Date.now() })).frame;
      }
      return performance.now() - start;
    } finally {
      await client.close();
    }
  } finally {
    docker('rm', '-f', id);
  }
}

/** Ours: the workspace link opened at once in Chromium, until its canvas shows the xterm. */
async function browserFirstWindow(browser: Browser, ctx: BenchContext, variant: FirstFrameVariant, round: number): Promise<number> {
  // bypassCSP: the probe below evaluates the pixel check's source in the page (the client's CSP forbids eval).
  const context = await browser.newContext({ viewport: { width: 1024, height: 768 }, bypassCSP: true });
  await variant.prepare?.(ctx);
  const start = performance.now();
  const launched = await variant.launch(ctx, round);
  try {
    const page = await context.newPage();
    await page.goto(`${ctx.base}${launched.workspaceUrl}?disable_tips=1`);
    await page.waitForFunction(
      ([source, width]) => {
        const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas');
        const ctx2d = canvas?.getContext('2d');
        if (!canvas || !ctx2d || canvas.width !== width) return false;
        const pixels = ctx2d.getImageData(0, 0, canvas.width, canvas.height).data;
        return (new Function(`return (${source})`)() as (d: Uint8ClampedArray, w: number, h: number) => boolean)(pixels, canvas.width, canvas.height);
      },
      [showsFirstWindow.toString(), X_RES] as const,
      { timeout: CONTENT_TIMEOUT_MS, polling: 50 },
    );
    return performance.now() - start;
  } finally {
    await context.close();
    await launched.release();
  }
}

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi({ worker: true });
  const { base } = bench;
  let browser: Browser | undefined;
  try {
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'],
    });
    const definition = { name: image, cores: CORES, memory: MEMORY_MB * 1024 ** 2, xRes: X_RES, yRes: Y_RES, portMap: { vnc: '5900/tcp' } };
    const { zone, image: img, auth } = await registerLocalDesktop(bench.api, { ...definition, friendlyName: 'Desktop' });
    const staged = await bench.api.get(ImagesService).upsert({ ...definition, friendlyName: 'Staged desktop' });
    const pool = await post(base, 'create_staging_config', { ...auth, target_staging_config: { zone_id: zone.id, image_id: staged.id, num_sessions: 1, expiration: 24 } });
    const stagingConfigId = (pool.staging_config as { staging_config_id: string }).staging_config_id;
    const ctx: BenchContext = { base, auth, imageId: img.id, stagedImageId: staged.id, stagingConfigId };

    const results = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
    const bare: number[] = [];
    await bareFirstWindow(image); // warm the page cache for every path
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of VARIANTS) (results.get(variant.name) as number[]).push(await browserFirstWindow(browser, ctx, variant, round));
      bare.push(await bareFirstWindow(image));
    }
    console.log(`\nfirst window in the person's view (${image}, ${X_RES}x${Y_RES}, ${CORES} core, ${MEMORY_MB} MiB, ${ROUNDS} launches)`);
    for (const [name, values] of results) console.log(row(`request → xterm on the page (${name})`, values));
    console.log(row('bare docker run → xterm via direct RFB (baseline)', bare));
    for (const [name, values] of results) {
      console.log(`${name}: ratio at p50 ${(median(values) / median(bare)).toFixed(2)}, at p95 ${(percentile(values, 95) / percentile(bare, 95)).toFixed(2)}, slowest ${Math.max(...values).toFixed(0)} ms`);
    }
  } finally {
    await browser?.close();
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
