/**
 * Issue 4 benchmark: VNC streams read three ways in one run: straight from the server's port (baseline),
 * through our stream gateway (the api, as a process of its own), and through Debian's websockify.
 *  1. The reference desktop's VNC server (Xvnc): what a user gets. Its update loop sets the pace, so both proxies are
 *     measured against the same ceiling.
 *  2. A synthetic RFB server that answers every request at once from memory (synthetic-rfb-server.ts): the
 *     proxy is the limit, so this is each proxy's own throughput and added latency. The gateway reaches it
 *     through the same workspace, whose VNC port is pointed at the synthetic server for this part (the one
 *     seam: a database update instead of a container).
 * Latency: round trips of a 1×1 region; throughput: full frames, in paired rounds.
 * Session recording (issue 11): the gateway path runs a second time with record_sessions on (spool files and
 * uploads to a file:// store under a temporary directory), taking turns with the others; printed as the ratio
 * recorded / not recorded (target ≥ 0.9×). The conversion queue is paused meanwhile, so no ffmpeg competes.
 */
import 'reflect-metadata';
import { ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { parseId } from '@ws/common';
import { dataSourceOptions } from '@ws/database';
import { JOB_QUEUE } from '@ws/queue';
import { DataSource } from 'typeorm';
import { benchDeployment, benchEnv, desktopImage, freePort, listening, post, registerLocalDesktop, streamCookie, until, untilRunning, withSetupApi } from './harness';
import { Transport } from './rfb-bench-client';
import { ClientProcess, Throughput } from './rfb-client-process';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.BENCH_STREAM_ROUNDS ?? 6);
const ROUND_TRIPS = Number(process.env.BENCH_STREAM_ROUND_TRIPS ?? 150);
// Throughput varies a few percent from one short window to the next (the VNC server paces its updates), so
// it is measured in many short paired rounds and compared round by round.
const THROUGHPUT_ROUNDS = Number(process.env.BENCH_STREAM_THROUGHPUT_ROUNDS ?? 30);
const SYNTHETIC_ROUNDS = Number(process.env.BENCH_STREAM_SYNTHETIC_ROUNDS ?? 10);
const STREAM_MS = Number(process.env.BENCH_STREAM_MS ?? 1000);
const ROOT = join(__dirname, '..', '..');
/** The compiled apps beside this compiled bench (dist/, or a private build directory). */
const BUILT = join(__dirname, '..');
const RECORDED = 'gateway, recording';

/** `prepare` runs before each of the path's runs (e.g. switches recording on for the connection it opens). */
type Path = [name: string, transport: Transport, password: string | undefined, proxyPid: number | undefined, prepare?: () => Promise<void>];

/**
 * Runs the paths in turns (the order rotated every round, so a slow moment of the machine falls on all paths
 * alike) and prints latency, throughput with the CPU behind it, and the gateway's ratios. Paths: direct,
 * gateway, websockify, in that order.
 */
async function compare(client: ClientProcess, title: string, serverPid: number, paths: Path[], latencyRounds: number, throughputRounds: number, throughputNote: string): Promise<void> {
  const latencies = new Map<string, number[]>(paths.map(([name]) => [name, []]));
  for (let round = 0; round < latencyRounds; round++) {
    for (let i = 0; i < paths.length; i++) {
      const [name, transport, password, , prepare] = paths[(round + i) % paths.length];
      await prepare?.();
      latencies.get(name)!.push(...(await client.run({ op: 'latency', transport, password, roundTrips: ROUND_TRIPS })));
    }
  }
  const rounds: Array<Map<string, Throughput>> = [];
  for (let round = 0; round < throughputRounds; round++) {
    const results = new Map<string, Throughput>();
    for (let i = 0; i < paths.length; i++) {
      const [name, transport, password, pid, prepare] = paths[(round + i) % paths.length];
      await prepare?.();
      results.set(name, await client.run({ op: 'throughput', transport, password, durationMs: STREAM_MS, serverPid, proxyPid: pid }));
    }
    rounds.push(results);
  }
  const of = (name: string, figure: keyof Throughput) => median(rounds.map((r) => r.get(name)![figure]));
  const ratios = (a: string, b: string) => rounds.map((r) => r.get(a)!.mbPerSec / r.get(b)!.mbPerSec);
  const [direct, gateway, wsfy] = paths.map(([name]) => name);
  console.log(`\n${title}: latency ${latencyRounds} rounds × ${ROUND_TRIPS} 1×1 round trips; throughput ${throughputRounds} rounds × ${STREAM_MS / 1000} s of full Raw frames with 3 requests in flight; paths take turns`);
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
    `gateway throughput vs websockify, median of ${throughputRounds} per-round ratios: ${median(vsWebsockify).toFixed(3)}× (${throughputNote}; middle half ${percentile(vsWebsockify, 25).toFixed(2)}–${percentile(vsWebsockify, 75).toFixed(2)}, ` +
      `gateway ahead in ${wins} of ${throughputRounds} rounds); vs direct ${median(ratios(gateway, direct)).toFixed(2)}×, websockify vs direct ${median(ratios(wsfy, direct)).toFixed(2)}×`,
  );
  if (latencies.has(RECORDED)) {
    const recorded = ratios(RECORDED, gateway);
    console.log(
      `gateway throughput with recording on vs off, median of ${throughputRounds} per-round ratios: ${median(recorded).toFixed(3)}× (target ≥ 0.90; middle half ${percentile(recorded, 25).toFixed(2)}–${percentile(recorded, 75).toFixed(2)}); ` +
        `recording adds ${addedMs(RECORDED)} ms median latency vs direct (gateway alone ${addedMs(gateway)} ms)`,
    );
  }
}

function startWebsockify(port: number, target: number): ChildProcess {
  return spawn('websockify', [`127.0.0.1:${port}`, `127.0.0.1:${target}`], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const image = desktopImage(ROOT);
  const apiPort = await freePort();
  const deployment = await benchDeployment('stream');
  const { settings, config } = deployment;
  const children: ChildProcess[] = [];
  let workspaceId: string | null = null;
  let ownerId: string | undefined;
  const base = `http://127.0.0.1:${apiPort}`;
  let auth = {};
  let client: ClientProcess | undefined;
  let db: DataSource | undefined;
  let conversions: Queue | undefined;
  let redis: Redis | undefined;
  // Recordings go to a file:// store (the embedded default) and a spool of their own, removed afterwards.
  const recordingDir = mkdtempSync(join(tmpdir(), 'ws-bench-recording-'));
  try {
    // Registration through the services, then the api and worker as processes of their own.
    const registered = await withSetupApi(settings, (setup) =>
      registerLocalDesktop(setup, { name: image, friendlyName: 'Desktop', cores: 1, memory: 1024 ** 3 }, { cores: 8, memory: 16 * 1024 ** 3 }));
    const img = registered.image;
    auth = registered.auth;
    const env = benchEnv(settings, { API_PORT: String(apiPort), API_HOST: '127.0.0.1', STORAGE_URL: `file://${join(recordingDir, 'store')}`, RECORDING_SPOOL_DIR: join(recordingDir, 'spool') });
    children.push(spawn(process.execPath, [join(BUILT, 'apps/worker/src/main.js')], { env, stdio: 'inherit' }));
    // API_NODE_FLAGS passes V8/node flags to the api process, for tuning experiments (e.g. --max-semi-space-size=1).
    const api = spawn(process.execPath, [...(process.env.API_NODE_FLAGS ? process.env.API_NODE_FLAGS.split(' ') : []), ...(process.env.BENCH_PROFILE_API ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_API}`] : []), join(BUILT, 'apps/api/src/main.js')], { env, stdio: 'inherit' });
    children.push(api);
    await until('the api', async () => ((await fetch(`${base}/api/health`)).ok ? true : undefined));

    const requested = await post(base, 'request_workspace', { ...auth, image_id: img.id });
    workspaceId = requested.workspace_id as string;
    ownerId = requested.user_id as string;
    const running = await untilRunning(base, { ...auth, workspace_id: workspaceId, user_id: ownerId });
    const workspace = running.workspace as { port: number; token: string };
    const container = execFileSync('docker', ['ps', '-q', '--filter', `label=workspace-server.deployment-id=${settings.DEPLOYMENT_ID}`], { encoding: 'utf8' }).trim().split('\n')[0];
    const desktopPid = Number(execFileSync('docker', ['inspect', '-f', '{{.State.Pid}}', container], { encoding: 'utf8' }).trim());
    const jwt = (running.workspace_url as string).split('/').pop() as string;
    // The gateway takes the session only from its cookie, which the browser client's connect call sets.
    const gatewayUrl = `ws://127.0.0.1:${apiPort}/api/stream/${workspaceId}/vnc`;
    const gatewayHeaders = { cookie: await streamCookie(base, jwt, workspaceId) };
    db = await new DataSource(dataSourceOptions(config, settings.DATABASE_NAME)).initialize();
    const database = db;
    // The gateway reads the owner's record_sessions at each connection: each path's runs set it first.
    const recording = (on: boolean) => async () => void (await database.query('UPDATE groups SET record_sessions = $1', [on]));
    redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: null });
    conversions = new Queue(JOB_QUEUE['recording.convert'], { connection: redis, prefix: settings.REDIS_PREFIX });
    await conversions.pause();

    client = ClientProcess.start();
    const websockifyPort = await freePort();
    const websockify = startWebsockify(websockifyPort, workspace.port);
    children.push(websockify);
    await listening(websockifyPort);
    await compare(client, 'VNC stream of the reference desktop (Xvnc)', desktopPid, [
      ['direct TCP (baseline)', { kind: 'tcp', host: '127.0.0.1', port: workspace.port }, workspace.token, undefined],
      ['stream gateway', { kind: 'ws', url: gatewayUrl, headers: gatewayHeaders }, undefined, api.pid, recording(false)],
      ['websockify', { kind: 'ws', url: `ws://127.0.0.1:${websockifyPort}/`, protocols: ['binary'] }, workspace.token, websockify.pid],
      [RECORDED, { kind: 'ws', url: gatewayUrl, headers: gatewayHeaders }, undefined, api.pid, recording(true)],
    ], ROUNDS, THROUGHPUT_ROUNDS, "the VNC server's update pacing sets both proxies' pace, so they tie");

    const syntheticPort = await freePort();
    const synthetic = fork(join(__dirname, 'synthetic-rfb-server.js'), [String(syntheticPort)], { stdio: 'inherit' });
    children.push(synthetic);
    await listening(syntheticPort);
    await db.query(`UPDATE workspaces SET host_ports = jsonb_set(host_ports, '{vnc}', to_jsonb($1::int)) WHERE id = $2`, [syntheticPort, parseId(workspaceId)]);
    const syntheticWebsockifyPort = await freePort();
    const syntheticWebsockify = startWebsockify(syntheticWebsockifyPort, syntheticPort);
    children.push(syntheticWebsockify);
    await listening(syntheticWebsockifyPort);
    await compare(client, 'Synthetic RFB stream answered at once (the proxy is the limit)', synthetic.pid!, [
      ['direct TCP (baseline)', { kind: 'tcp', host: '127.0.0.1', port: syntheticPort }, undefined, undefined],
      ['stream gateway', { kind: 'ws', url: gatewayUrl, headers: gatewayHeaders }, undefined, api.pid, recording(false)],
      ['websockify', { kind: 'ws', url: `ws://127.0.0.1:${syntheticWebsockifyPort}/`, protocols: ['binary'] }, undefined, syntheticWebsockify.pid],
      [RECORDED, { kind: 'ws', url: gatewayUrl, headers: gatewayHeaders }, undefined, api.pid, recording(true)],
    ], ROUNDS, SYNTHETIC_ROUNDS, 'target ≥ 1.00');
    await printRecordings(db);
  } finally {
    await conversions?.close();
    redis?.disconnect();
    await db?.destroy();
    client?.stop();
    if (workspaceId) await post(base, 'destroy_workspace', { ...auth, workspace_id: workspaceId, user_id: ownerId }).catch(() => undefined);
    await until('the workspace removal', async () => ((await post(base, 'get_workspace_status', { ...auth, workspace_id: workspaceId, user_id: ownerId })).error_message?.toString().startsWith('Invalid') ? true : undefined), 30_000).catch(() => undefined);
    for (const child of children) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    await deployment.close();
    rmSync(recordingDir, { recursive: true, force: true });
  }
}

/** What became of the recorded connections: a ratio measured on recordings that stopped early would flatter. */
async function printRecordings(db: DataSource): Promise<void> {
  const settled = await until('the recordings to be finalized', async () => {
    const [{ open }] = (await db.query(`SELECT count(*)::int AS open FROM session_recordings WHERE status = 'recording'`)) as Array<{ open: number }>;
    return open === 0 ? true : undefined;
  }, 120_000).catch(() => false);
  const rows = (await db.query(
    `SELECT count(*)::int AS count, coalesce(sum(capture_bytes), 0)::float8 AS bytes, count(*) FILTER (WHERE error IS NOT NULL)::int AS stopped, sum(segment_count)::int AS segments FROM session_recordings`,
  )) as Array<{ count: number; bytes: number; stopped: number; segments: number }>;
  const { count, bytes, stopped, segments } = rows[0];
  console.log(`\nrecorded connections: ${count}, ${(bytes / 1024 / 1024).toFixed(0)} MiB of capture in ${segments ?? 0} segments stored; ${stopped} stopped early${settled ? '' : ' (some still finalizing after 120 s)'}`);
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
