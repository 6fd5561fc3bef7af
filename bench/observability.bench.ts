/**
 * Issue 23 benchmark, two parts.
 * 1. The cost of observability: the same api (its own process, on one seeded deployment) with Prometheus metrics
 *    and JSON logging on (METRICS_PORT set, LOG_FORMAT=json, LOG_LEVEL=log: a line per request, written to a file
 *    as a container runtime would collect standard output) against both off (METRICS_PORT=0, LOG_LEVEL=warn), under
 *    autocannon on get_user, alternating rounds. Target: on/off requests/s ≥ 0.95.
 * 2. The service image (scripts/build-compose-images.sh): its size, and its start time: from `docker run` of the
 *    api to /api/health/live answering 200 (host network, the bench deployment's PostgreSQL and Redis).
 */
import 'reflect-metadata';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { loadConfig, toWireId } from '@ws/common';
import { benchDeployment, benchEnv, freePort, treeCpuMs, until, withSetupApi } from './harness';
import { median } from './stats';

/** dist/ when compiled (the api's main.js is under it); the repository (scripts/) is the working directory of npm run bench. */
const ROOT = join(__dirname, '..');
const REPO = process.cwd();
const SECONDS = Number(process.env.BENCH_OBS_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_OBS_ROUNDS ?? 6);
const CONNECTIONS = 16;
const STARTS = Number(process.env.BENCH_IMAGE_STARTS ?? 3);
const TARGET_RATIO = 0.95;

interface Round {
  rps: number;
  cpuUs: number;
  errors: number;
}

async function load(url: string, body: object, pid: number, seconds: number): Promise<Round> {
  const cpuBefore = treeCpuMs(pid);
  const result = await autocannon({ url, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), connections: CONNECTIONS, duration: seconds, timeout: 10 });
  return { rps: result.requests.average, cpuUs: ((treeCpuMs(pid) - cpuBefore) * 1000) / Math.max(1, result.requests.total), errors: result.errors + result.timeouts + result.non2xx };
}

function stop(child: ChildProcess): Promise<unknown> {
  if (child.exitCode !== null) return Promise.resolve();
  child.kill('SIGINT');
  return new Promise((r) => child.once('exit', r));
}

async function observabilityCost(): Promise<void> {
  const deployment = await benchDeployment('obs');
  const logDir = mkdtempSync(join(tmpdir(), 'ws-bench-obs-'));
  const children: ChildProcess[] = [];
  try {
    const { auth, userId } = await withSetupApi(deployment.settings, async (setup) => {
      const [{ ApiKeysService }, { UsersService }] = await Promise.all([import('@ws/auth'), import('@ws/users')]);
      const { key, secret } = await setup.get(ApiKeysService).create({ name: 'bench', permissions: ['Global Admin'] });
      const user = await setup.get(UsersService).create({ username: 'bench-obs', first_name: 'Bench', last_name: 'Observed' });
      return { auth: { api_key: key.apiKey, api_key_secret: secret }, userId: toWireId(user.id) };
    });
    const [onPort, offPort, metricsPort] = await Promise.all([freePort(), freePort(), freePort()]);
    const logFile = join(logDir, 'api.log');
    const apiJs = join(ROOT, 'apps/api/src/main.js');
    // On: metrics listener and a JSON line per request, standard output into a file.
    const on = spawn(process.execPath, [apiJs], {
      env: benchEnv(deployment.settings, { API_PORT: String(onPort), API_HOST: '127.0.0.1', METRICS_PORT: String(metricsPort), METRICS_HOST: '127.0.0.1', LOG_FORMAT: 'json', LOG_LEVEL: 'log' }),
      stdio: ['ignore', openSync(logFile, 'a'), 'inherit'],
    });
    // Off: no metrics listener, warnings only.
    const off = spawn(process.execPath, [apiJs], {
      env: benchEnv(deployment.settings, { API_PORT: String(offPort), API_HOST: '127.0.0.1', METRICS_PORT: '0', LOG_FORMAT: 'json', LOG_LEVEL: 'warn' }),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(on, off);
    const bases = { on: `http://127.0.0.1:${onPort}`, off: `http://127.0.0.1:${offPort}` };
    const pids = { on: on.pid as number, off: off.pid as number };
    for (const base of Object.values(bases)) await until(`the api at ${base}`, async () => ((await fetch(`${base}/api/health`).catch(() => null))?.ok ? true : undefined));
    const body = { ...auth, target_user: { user_id: userId } };
    const url = (base: string) => `${base}/api/public/get_user`;
    for (const base of Object.values(bases)) {
      const res = await fetch(url(base), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (res.status !== 200) throw new Error(`get_user at ${base} answered ${res.status}: ${await res.text()}`);
    }
    await load(url(bases.on), body, pids.on, 2);
    await load(url(bases.off), body, pids.off, 2);
    const runs = { on: [] as Round[], off: [] as Round[] };
    for (let round = 0; round < ROUNDS; round++) {
      const order: Array<'on' | 'off'> = round % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
      for (const side of order) runs[side].push(await load(url(bases[side]), body, pids[side], SECONDS));
      // A scrape per round, as Prometheus would (and proof the listener is live).
      const scraped = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      if (!scraped.includes('workspace_server_http_requests_total')) throw new Error('the metrics listener shows no request counter');
    }
    const ratio = median(runs.on.map((r, i) => r.rps / runs.off[i].rps));
    const fig = (rs: Round[]) => `${median(rs.map((r) => r.rps)).toFixed(0).padStart(6)} req/s   ${median(rs.map((r) => r.cpuUs)).toFixed(0).padStart(5)} µs CPU/req   errors ${rs.reduce((n, r) => n + r.errors, 0)}`;
    console.log(`\nObservability cost: get_user under autocannon (${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS} s), api processes of their own`);
    console.log(`  metrics + JSON logs on  ${fig(runs.on)}   (log written: ${(statSync(logFile).size / 1e6).toFixed(1)} MB)`);
    console.log(`  both off                ${fig(runs.off)}`);
    // On a shared machine requests/s swings with other load; CPU per request is steadier, and off/on CPU per
    // request is the throughput ratio a CPU-bound api would see.
    const cpuRatio = median(runs.off.map((r) => r.cpuUs)) / median(runs.on.map((r) => r.cpuUs));
    console.log(`  ratio on/off requests/s ${ratio.toFixed(2)} (per round: ${runs.on.map((r, i) => (r.rps / runs.off[i].rps).toFixed(2)).join(' ')})   CPU-bound ratio (off/on CPU per request) ${cpuRatio.toFixed(2)}`);
    console.log(`  target ≥ ${TARGET_RATIO}: requests/s ${ratio >= TARGET_RATIO ? 'met' : 'NOT met'}, CPU-bound ${cpuRatio >= TARGET_RATIO ? 'met' : 'NOT met'}`);
  } finally {
    await Promise.all(children.map(stop));
    rmSync(logDir, { recursive: true, force: true });
    await deployment.close();
  }
}

async function imageFigures(): Promise<void> {
  const built = execFileSync('bash', ['scripts/build-compose-images.sh'], { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const image = /^WS_COMPOSE_IMAGE=(.+)$/m.exec(built)?.[1];
  if (!image) throw new Error(`scripts/build-compose-images.sh named no service image:\n${built}`);
  const size = Number(execFileSync('docker', ['image', 'inspect', '--format', '{{.Size}}', image], { encoding: 'utf8' }).trim());
  const deployment = await benchDeployment('image');
  const config = Object.assign(loadConfig(), deployment.settings);
  const starts: number[] = [];
  try {
    for (let i = 0; i < STARTS; i++) {
      const port = await freePort();
      const name = `ws-bench-image-start-${process.pid}-${i}`;
      const env = {
        DATABASE_HOST: config.DATABASE_HOST, DATABASE_PORT: String(config.DATABASE_PORT), DATABASE_USER: config.DATABASE_USER, DATABASE_NAME: config.DATABASE_NAME,
        ...(config.DATABASE_PASSWORD ? { DATABASE_PASSWORD: config.DATABASE_PASSWORD } : {}),
        REDIS_URL: config.REDIS_URL, REDIS_PREFIX: config.REDIS_PREFIX, DEPLOYMENT_ID: config.DEPLOYMENT_ID, API_HOST: '127.0.0.1', API_PORT: String(port), METRICS_PORT: '0', LOG_LEVEL: 'warn',
      };
      const started = performance.now();
      execFileSync('docker', ['run', '-d', '--rm', '--name', name, '--network', 'host', ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]), image], { stdio: ['ignore', 'ignore', 'inherit'] });
      try {
        await until('the image\'s api live', async () => ((await fetch(`http://127.0.0.1:${port}/api/health/live`).catch(() => null))?.ok ? true : undefined), 120_000);
        starts.push(performance.now() - started);
      } finally {
        execFileSync('docker', ['rm', '-f', name], { stdio: 'ignore' });
      }
    }
  } finally {
    await deployment.close();
  }
  console.log(`\nService image ${image}`);
  console.log(`  size ${(size / 1e6).toFixed(0)} MB (docker image inspect .Size: every layer, the Node.js base included)`);
  console.log(`  start: docker run of the api → /api/health/live 200: median ${(median(starts) / 1000).toFixed(2)} s (runs: ${starts.map((s) => (s / 1000).toFixed(2)).join(' ')} s)`);
}

async function main(): Promise<void> {
  await observabilityCost();
  await imageFigures();
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
