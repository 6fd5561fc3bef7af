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
import { freePort, treeCpuMs } from './processes';
import { RfbBenchClient, Transport } from './rfb-bench-client';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.BENCH_STREAM_ROUNDS ?? 6);
const ROUND_TRIPS = Number(process.env.BENCH_STREAM_ROUND_TRIPS ?? 150);
// Throughput varies a few percent from one short window to the next (the VNC server paces its updates), so
// it is measured in many short paired rounds and compared round by round.
const THROUGHPUT_ROUNDS = Number(process.env.BENCH_STREAM_THROUGHPUT_ROUNDS ?? 30);
const STREAM_MS = Number(process.env.BENCH_STREAM_MS ?? 1000);
const ROOT = join(__dirname, '..', '..');


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

interface Throughput {
  mbPerSec: number;
  /** CPU the proxy process (with its children) spent per MiB streamed, ms; 0 for the direct path. */
  proxyCpuMsPerMiB: number;
  /** CPU this benchmark's client spent per MiB received, ms (websocket decoding shows here). */
  clientCpuMsPerMiB: number;
  /** CPU of the workspace's processes (the VNC server) per MiB, ms. */
  serverCpuMsPerMiB: number;
}


let serverPid = 0; // the workspace container's init, for the VNC server's CPU

/** 1×1 round trips on one connection, µs each. */
async function latency(transport: Transport, password?: string): Promise<number[]> {
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
    return latencyUs;
  } finally {
    client.end();
  }
}

/** Full Raw frames with 3 requests in flight on a fresh connection for STREAM_MS, with the CPU each side spent. */
async function throughput(transport: Transport, password?: string, proxyPid?: number): Promise<Throughput> {
  const client = await RfbBenchClient.open(transport, password);
  try {
    await client.roundTrip(0, 0, client.width, client.height); // warm up: one full frame
    const proxyBefore = proxyPid ? treeCpuMs(proxyPid) : 0;
    const clientBefore = process.cpuUsage();
    const serverBefore = treeCpuMs(serverPid);
    const streamed = await client.stream(STREAM_MS, 3);
    const clientCpu = process.cpuUsage(clientBefore);
    const serverCpuMs = treeCpuMs(serverPid) - serverBefore;
    const proxyCpuMs = proxyPid ? treeCpuMs(proxyPid) - proxyBefore : 0;
    const mib = streamed.bytes / 1024 / 1024;
    return {
      mbPerSec: mib / (streamed.ms / 1000),
      proxyCpuMsPerMiB: proxyCpuMs / mib,
      clientCpuMsPerMiB: (clientCpu.user + clientCpu.system) / 1000 / mib,
      serverCpuMsPerMiB: serverCpuMs / mib,
    };
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
    const api = spawn(process.execPath, [...(process.env.API_NODE_FLAGS ? process.env.API_NODE_FLAGS.split(' ') : []), ...(process.env.BENCH_PROFILE_API ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_API}`] : []), join(ROOT, 'dist/apps/api/src/main.js')], { env, stdio: 'inherit' });
    children.push(api);
    await until('the api', async () => ((await fetch(`${base}/api/health`)).ok ? true : undefined));

    const requested = await post(base, 'request_workspace', { ...auth, image_id: img.id });
    workspaceId = requested.workspace_id as string;
    const running = await until('the workspace', async () => {
      const status = await post(base, 'get_workspace_status', { ...auth, workspace_id: workspaceId });
      return (status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running' ? status : undefined;
    });
    const workspace = running.workspace as { port: number; token: string };
    const container = execFileSync('docker', ['ps', '-q', '--filter', `label=workspace-server.deployment-id=${settings.DEPLOYMENT_ID}`], { encoding: 'utf8' }).trim().split('\n')[0];
    serverPid = Number(execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', container], { encoding: 'utf8' }).trim());
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
    const paths: Array<[string, Transport, string | undefined, number | undefined]> = [
      ['direct TCP (baseline)', { kind: 'tcp', host: '127.0.0.1', port: workspace.port }, workspace.token, undefined],
      ['stream gateway', { kind: 'ws', url: `ws://127.0.0.1:${apiPort}/api/stream/${workspaceId}/vnc?token=${jwt}` }, undefined, api.pid],
      ['websockify', { kind: 'ws', url: `ws://127.0.0.1:${websockifyPort}/`, protocols: ['binary'] }, workspace.token, websockify.pid],
    ];
    // Each round runs every path once, in an order rotated every round, so a slow moment of the machine
    // falls on all paths alike; the throughput comparison is the median of per-round ratios.
    const latencies = new Map<string, number[]>(paths.map(([name]) => [name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < paths.length; i++) {
        const [name, transport, password] = paths[(round + i) % paths.length];
        latencies.get(name)!.push(...(await latency(transport, password)));
      }
    }
    const rounds: Array<Map<string, Throughput>> = [];
    for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
      const results = new Map<string, Throughput>();
      for (let i = 0; i < paths.length; i++) {
        const [name, transport, password, pid] = paths[(round + i) % paths.length];
        results.set(name, await throughput(transport, password, pid));
      }
      rounds.push(results);
    }
    const of = (name: string, figure: keyof Throughput) => median(rounds.map((r) => r.get(name)![figure]));
    const ratios = (a: string, b: string) => rounds.map((r) => r.get(a)!.mbPerSec / r.get(b)!.mbPerSec);
    const [direct, gateway, wsfy] = paths.map(([name]) => name);
    console.log(`\nVNC stream of the reference desktop through three paths, taking turns: latency ${ROUNDS} rounds × ${ROUND_TRIPS} 1×1 round trips; throughput ${THROUGHPUT_ROUNDS} rounds × ${STREAM_MS / 1000} s of full Raw frames with 3 requests in flight`);
    for (const [name, , , pid] of paths) {
      const us = latencies.get(name)!;
      console.log(
        `${name.padEnd(24)} round trip p50 ${(median(us) / 1000).toFixed(3).padStart(7)} ms  p95 ${(percentile(us, 95) / 1000).toFixed(3).padStart(7)} ms   ` +
          `throughput ${of(name, 'mbPerSec').toFixed(1).padStart(7)} MiB/s   CPU per MiB: VNC server ${of(name, 'serverCpuMsPerMiB').toFixed(2)} ms, client ${of(name, 'clientCpuMsPerMiB').toFixed(2)} ms` +
          (pid ? `, proxy ${of(name, 'proxyCpuMsPerMiB').toFixed(2)} ms` : ''),
      );
    }
    const addedMs = (name: string) => ((median(latencies.get(name)!) - median(latencies.get(direct)!)) / 1000).toFixed(3);
    console.log(`gateway added median latency: ${addedMs(gateway)} ms (target ≤ 1 ms); websockify adds ${addedMs(wsfy)} ms`);
    const vsWebsockify = ratios(gateway, wsfy);
    const wins = vsWebsockify.filter((r) => r >= 1).length;
    console.log(
      `gateway throughput vs websockify, median of ${THROUGHPUT_ROUNDS} per-round ratios: ${median(vsWebsockify).toFixed(3)}× (target ≥ 1.00; middle half ${percentile(vsWebsockify, 25).toFixed(2)}–${percentile(vsWebsockify, 75).toFixed(2)}, ` +
        `gateway ahead in ${wins} of ${THROUGHPUT_ROUNDS} rounds); vs direct ${median(ratios(gateway, direct)).toFixed(2)}×, websockify vs direct ${median(ratios(wsfy, direct)).toFixed(2)}×`,
    );
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
