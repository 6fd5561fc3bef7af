/**
 * Issue 4 benchmark: a VNC stream of the reference desktop read three ways in one run: straight from the
 * container's port (baseline), through our stream gateway, and through Debian's websockify. The api and
 * websockify each run as their own process. Latency: round trips of a 1×1 region; throughput: full frames.
 */
import 'reflect-metadata';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ApiKeysService } from '@ws/auth';
import { loadConfig, randomSecret } from '@ws/common';
import { dropDatabase, migrate } from '@ws/database';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { createApi } from '../apps/api/src/bootstrap';
import { RfbBenchClient, Transport } from './rfb-bench-client';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.BENCH_STREAM_ROUNDS ?? 6);
const ROUND_TRIPS = Number(process.env.BENCH_STREAM_ROUND_TRIPS ?? 150);
const STREAM_MS = Number(process.env.BENCH_STREAM_MS ?? 1500);
const ROOT = join(__dirname, '..', '..');

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function post(base: string, op: string, body: object): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}/api/public/${op}`, { method: 'POST', body: JSON.stringify(body) });
  return (await res.json()) as Record<string, unknown>;
}

interface PathResult {
  name: string;
  latencyUs: number[];
  mbPerSec: number;
}

async function measure(name: string, transport: Transport, password?: string): Promise<PathResult> {
  const client = await RfbBenchClient.open(transport, password);
  try {
    await client.roundTrip(0, 0, client.width, client.height); // warm up: one full frame
    const latencyUs: number[] = [];
    for (let i = 0; i < ROUND_TRIPS; i++) {
      // A random pause first: the request then meets the server's update loop at a random phase, so an added
      // delay shifts the whole distribution instead of hiding inside the loop's period.
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 12)));
      const start = process.hrtime.bigint();
      await client.roundTrip(i % 64, 0, 1, 1);
      latencyUs.push(Number(process.hrtime.bigint() - start) / 1000);
    }
    const bytesPerSecond = await client.stream(STREAM_MS, 3);
    return { name, latencyUs, mbPerSec: bytesPerSecond / 1024 / 1024 };
  } finally {
    client.end();
  }
}

async function main(): Promise<void> {
  const image = process.env.WS_TEST_DESKTOP_IMAGE ?? execFileSync('bash', ['scripts/build-desktop-image.sh'], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n').pop()!;
  const suffix = randomSecret(4);
  const apiPort = await freePort();
  const settings = { DATABASE_NAME: `ws_bench_stream_${suffix}`, REDIS_PREFIX: `wsbench-${suffix}`, DEPLOYMENT_ID: `bench-${suffix}`, LOG_LEVEL: 'warn' };
  const config = Object.assign(loadConfig(), settings);
  await migrate(config, settings.DATABASE_NAME);
  const children: ChildProcess[] = [];
  let workspaceId: string | null = null;
  const base = `http://127.0.0.1:${apiPort}`;
  let auth = {};
  try {
    // Registration through the services, then the api and worker as processes of their own.
    const setup = await createApi(settings);
    await setup.init();
    const zone = await setup.get(ZonesService).ensure('default');
    await setup.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
    const img = await setup.get(ImagesService).upsert({ name: image, friendlyName: 'Desktop', cores: 1, memory: 1024 ** 3 });
    const { key, secret } = await setup.get(ApiKeysService).create({ name: 'bench', permissions: ['Global Admin'] });
    await setup.close();
    auth = { api_key: key.apiKey, api_key_secret: secret };
    const env = { ...process.env, ...settings, API_PORT: String(apiPort), API_HOST: '127.0.0.1' };
    children.push(spawn(process.execPath, [join(ROOT, 'dist/apps/worker/src/main.js')], { env, stdio: 'inherit' }));
    // API_NODE_FLAGS passes V8/node flags to the api process, for tuning experiments (e.g. --max-semi-space-size=1).
    children.push(spawn(process.execPath, [...(process.env.API_NODE_FLAGS ? process.env.API_NODE_FLAGS.split(' ') : []), ...(process.env.BENCH_PROFILE_API ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_API}`] : []), join(ROOT, 'dist/apps/api/src/main.js')], { env, stdio: 'inherit' }));
    await until('the api', async () => ((await fetch(`${base}/api/health`)).ok ? true : undefined));

    const requested = await post(base, 'request_workspace', { ...auth, image_id: img.id });
    workspaceId = requested.workspace_id as string;
    const running = await until('the workspace', async () => {
      const status = await post(base, 'get_workspace_status', { ...auth, workspace_id: workspaceId });
      return (status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running' ? status : undefined;
    });
    const workspace = running.workspace as { port: number; token: string };
    const jwt = (running.workspace_url as string).split('/').pop() as string;

    const websockifyPort = await freePort();
    const websockify = spawn('websockify', [`127.0.0.1:${websockifyPort}`, `127.0.0.1:${workspace.port}`], { stdio: 'ignore' });
    children.push(websockify);
    await until('websockify', () => new Promise<true | undefined>((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(true)).listen(websockifyPort, '127.0.0.1', () => probe.close(() => resolve(undefined)));
    }));

    // The VNC server adapts its pace to each connection over time, so the paths take turns in short rounds
    // with the order rotated every round, and each path's figure is its median over the rounds.
    const paths: Array<[string, Transport, string | undefined]> = [
      ['direct TCP (baseline)', { kind: 'tcp', host: '127.0.0.1', port: workspace.port }, workspace.token],
      ['stream gateway', { kind: 'ws', url: `ws://127.0.0.1:${apiPort}/api/stream/${workspaceId}/vnc?token=${jwt}` }, undefined],
      ['websockify', { kind: 'ws', url: `ws://127.0.0.1:${websockifyPort}/`, protocols: ['binary'] }, workspace.token],
    ];
    const runs: PathResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < paths.length; i++) {
        const [name, transport, password] = paths[(round + i) % paths.length];
        runs.push(await measure(name, transport, password));
      }
    }
    const merged = paths.map(([name]) => {
      const of = runs.filter((r) => r.name === name);
      return { name, latencyUs: of.flatMap((r) => r.latencyUs), mbPerSec: median(of.map((r) => r.mbPerSec)) };
    });
    const [direct, gateway, wsfy] = merged;
    console.log(`\nVNC stream of the reference desktop: ${ROUNDS} rounds per path, each ${ROUND_TRIPS} 1×1 round trips and ${STREAM_MS / 1000} s of full Raw frames with 3 requests in flight`);
    for (const r of merged) {
      console.log(`${r.name.padEnd(24)} round trip p50 ${(median(r.latencyUs) / 1000).toFixed(3).padStart(7)} ms  p95 ${(percentile(r.latencyUs, 95) / 1000).toFixed(3).padStart(7)} ms   throughput ${r.mbPerSec.toFixed(1).padStart(7)} MiB/s`);
    }
    console.log(`gateway added median latency: ${((median(gateway.latencyUs) - median(direct.latencyUs)) / 1000).toFixed(3)} ms (target ≤ 1 ms); websockify adds ${((median(wsfy.latencyUs) - median(direct.latencyUs)) / 1000).toFixed(3)} ms`);
    console.log(`gateway throughput (median of rounds) vs websockify: ${(gateway.mbPerSec / wsfy.mbPerSec).toFixed(2)}× (target ≥ 1.00); vs direct ${(gateway.mbPerSec / direct.mbPerSec).toFixed(2)}×`);
  } finally {
    if (workspaceId) await post(base, 'destroy_workspace', { ...auth, workspace_id: workspaceId }).catch(() => undefined);
    await until('the workspace removal', async () => ((await post(base, 'get_workspace_status', { ...auth, workspace_id: workspaceId })).error_message?.toString().startsWith('Invalid') ? true : undefined), 30_000).catch(() => undefined);
    for (const child of children) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    for (const id of execFileSync('docker', ['ps', '-aq', '--filter', `label=workspace-server.deployment-id=${settings.DEPLOYMENT_ID}`], { encoding: 'utf8' }).split('\n').filter(Boolean)) {
      execFileSync('docker', ['rm', '-f', id]);
    }
    await dropDatabase(config, settings.DATABASE_NAME);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
