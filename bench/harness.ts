/**
 * Helpers shared by the benchmarks: loopback ports, bounded waits, the public API, CPU time read from /proc, and
 * one bench deployment's setup (with a license of its own) and teardown.
 */
import { execFileSync } from 'node:child_process';
import { createHash, createPublicKey, generateKeyPairSync, KeyObject, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { AddressInfo, createServer } from 'node:net';
import type { INestApplicationContext } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AppConfig } from '@ws/common';
import type { ImageDefinition } from '@ws/images';
import { featureSet, issueLicenseKey, LICENSE_FEATURES, publicKeyText } from '@ws/licensing';
import type { LifecycleWebhook } from './lifecycle-webhook';

/** Polls `check` every 100 ms until it answers a value (errors count as not yet), for at most `timeoutMs`. */
export async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Calls a public API operation and answers its JSON body, whatever the status. */
export async function post(base: string, op: string, body: object): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}/api/public/${op}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return (await res.json()) as Record<string, unknown>;
}

/**
 * Polls get_workspace_status with `query` (credentials, workspace_id, user_id) until the workspace runs; answers that
 * reply, whose workspace_url carries the owner's current session JWT.
 */
export function untilRunning(base: string, query: object, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return until('the workspace running', async () => {
    const status = await post(base, 'get_workspace_status', query);
    return (status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running' ? status : undefined;
  }, timeoutMs);
}

/** A launched workspace, with the server placement chose for it. */
export interface Launched {
  userId: string;
  workspaceId: string;
  hostname: string;
}

/**
 * One request_workspace per user, all at once, each then followed until `running`: by its webhook when `watcher` is
 * given (bench/lifecycle-webhook.ts: nothing polled while the desktops start), else polled (get_workspace_status,
 * skip_agent_check, every `pollMs`) as an integrator without webhooks would; a workspace that fails fails the
 * burst. Answers the time from the first request until the last one ran, and the workspaces (where they run is
 * read once each, after the clock stopped).
 */
export async function launchAll(
  base: string, auth: BenchAuth, userIds: string[], imageId: string, pollMs: number, timeoutMs = 300_000, watcher?: LifecycleWebhook,
): Promise<{ elapsedMs: number; launched: Launched[] }> {
  const start = performance.now();
  const deadline = Date.now() + timeoutMs;
  const status = (userId: string, workspaceId: string) =>
    post(base, 'get_workspace_status', { ...auth, user_id: userId, workspace_id: workspaceId, skip_agent_check: true });
  const runningIds = await Promise.all(userIds.map(async (userId) => {
    const requested = await post(base, 'request_workspace', { ...auth, user_id: userId, image_id: imageId });
    const workspaceId = requested.workspace_id as string;
    if (!workspaceId) throw new Error(`request_workspace: ${JSON.stringify(requested)}`);
    if (watcher) {
      const { outcome, message } = await watcher.outcome(workspaceId, deadline);
      if (outcome === 'failed') throw new Error(`workspace ${workspaceId} failed: ${message}`);
      return { userId, workspaceId, hostname: '' };
    }
    while (Date.now() < deadline) {
      const answer = await status(userId, workspaceId);
      const workspace = answer.workspace as { operational_status?: string; hostname?: string } | undefined;
      if (workspace?.operational_status === 'running') return { userId, workspaceId, hostname: workspace.hostname ?? '' };
      if (answer.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(answer)}`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
    throw new Error(`workspace ${workspaceId} not running within ${timeoutMs / 1000} s`);
  }));
  const elapsedMs = performance.now() - start;
  const launched = await Promise.all(runningIds.map(async (w) => (w.hostname
    ? w
    : { ...w, hostname: ((await status(w.userId, w.workspaceId)).workspace as { hostname?: string } | undefined)?.hostname ?? '' })));
  return { elapsedMs, launched };
}

/** destroy_workspace for each, then until get_workspace_status knows none of them any more (bounded). */
export async function destroyAll(base: string, auth: BenchAuth, launched: Launched[], timeoutMs = 180_000): Promise<void> {
  await Promise.all(launched.map(({ userId, workspaceId }) => post(base, 'destroy_workspace', { ...auth, user_id: userId, workspace_id: workspaceId })));
  await until('the workspaces destroyed', async () => {
    const left = await Promise.all(launched.map(async ({ userId, workspaceId }) => (await post(base, 'get_workspace_status', { ...auth, user_id: userId, workspace_id: workspaceId })).workspace));
    return left.every((w) => !w) ? true : undefined;
  }, timeoutMs);
}

/** How many of the workspaces each server holds, e.g. `local 8, second 8`. */
export function placementSplit(launched: Launched[]): string {
  const counts = new Map<string, number>();
  for (const { hostname } of launched) counts.set(hostname, (counts.get(hostname) ?? 0) + 1);
  return [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([hostname, n]) => `${hostname} ${n}`).join(', ');
}

/** Users made through the api (create_user) one after another (set-up, not measured), for benches that launch as many at once. */
export async function createUsers(base: string, auth: BenchAuth, prefix: string, count: number): Promise<string[]> {
  const userIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const created = await post(base, 'create_user', { ...auth, target_user: { username: `${prefix}${i}` } });
    const userId = (created.user as { user_id?: string } | undefined)?.user_id;
    if (!userId) throw new Error(`create_user: ${JSON.stringify(created)}`);
    userIds.push(userId);
  }
  return userIds;
}

/** The browser client's connect call (POST /api/client/connect): answers the `ws_stream=<jwt>` cookie the stream gateway takes. */
export async function streamCookie(base: string, jwt: string, workspaceId: string): Promise<string> {
  const connected = await fetch(`${base}/api/client/connect`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ session_jwt: jwt, workspace_id: workspaceId }) });
  const cookie = connected.headers.getSetCookie().find((c) => c.startsWith('ws_stream='))?.split(';')[0];
  if (!connected.ok || !cookie) throw new Error(`POST /api/client/connect answered ${connected.status} without a stream cookie`);
  return cookie;
}

/** Resolves once something listens on the loopback port. */
export async function listening(port: number): Promise<void> {
  await until(`a listener on ${port}`, () => new Promise<true | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true)).listen(port, '127.0.0.1', () => probe.close(() => resolve(undefined)));
  }));
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system, ms) of a process and all its descendants, from /proc. */
export function treeCpuMs(rootPid: number): number {
  const TICK_MS = 10; // USER_HZ is 100 on Linux
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command (which may contain spaces) start at ") ": state ppid ... utime(14) stime(15).
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(entry), Number(fields[1]));
      ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]));
    } catch {
      // the process ended while we looked
    }
  }
  let total = 0;
  for (const [pid, t] of ticks) {
    for (let p: number | undefined = pid, depth = 0; p !== undefined && p > 1 && depth < 64; p = parent.get(p), depth++) {
      if (p === rootPid) {
        total += t;
        break;
      }
    }
  }
  return total * TICK_MS;
}

// ---------------------------------------------------------------------------------------------------------
// One bench deployment: its own database, Redis prefix and deployment id, torn down whatever happened.
// The api, worker and services are imported on use, so processes that only need the helpers above (the RFB
// client process) do not load the application.

/** The reference desktop image: WS_TEST_DESKTOP_IMAGE, else what scripts/build-desktop-image.sh builds. */
export function desktopImage(cwd = process.cwd()): string {
  return process.env.WS_TEST_DESKTOP_IMAGE ?? execFileSync('bash', ['scripts/build-desktop-image.sh'], { cwd, encoding: 'utf8' }).trim().split('\n').pop()!;
}

/** Settings of a bench deployment of its own; `kind` goes into the database name (ws_bench_<kind>_…). */
export function benchSettings(kind?: string) {
  const suffix = randomBytes(4).toString('hex');
  return {
    DATABASE_NAME: `ws_bench_${kind ? `${kind}_` : ''}${suffix}`, REDIS_PREFIX: `wsbench-${suffix}`, DEPLOYMENT_ID: `bench-${suffix}`, LOG_LEVEL: 'warn',
    // Several apis and workers of one bench share the machine: no metrics listeners (they would all want 9464/9465).
    METRICS_PORT: 0,
    // The deployment trusts this bench process's issuer key: benchDeployment activates a license it signed.
    LICENSE_PUBLIC_KEYS: publicKeyText(createPublicKey(benchIssuer())),
  };
}

let issuer: KeyObject | undefined;

/** This bench process's license issuer: an Ed25519 key pair of its own, made on first use, never written anywhere. */
function benchIssuer(): KeyObject {
  return (issuer ??= generateKeyPairSync('ed25519').privateKey);
}

/** Seats of a bench license: far above what any bench runs at once (staging pools and bursts included). */
const BENCH_LICENSE_SEATS = 1000;

/**
 * An activation key for the deployment, signed by this process's issuer: every feature, BENCH_LICENSE_SEATS seats,
 * a day long. The license id comes from the deployment id, so activating it again changes nothing.
 */
function benchLicenseKey(settings: BenchSettings, now = new Date()): string {
  return issueLicenseKey({
    license_id: createHash('sha256').update(settings.DEPLOYMENT_ID).digest('hex').slice(0, 32), license_type: 'bench', sku: 'bench',
    limit: BENCH_LICENSE_SEATS, expiration: new Date(now.getTime() + 86_400_000), issued_at: now, issued_to: `bench ${settings.DEPLOYMENT_ID}`,
    features: featureSet(LICENSE_FEATURES),
  }, benchIssuer());
}

export type BenchSettings = ReturnType<typeof benchSettings>;

/** The settings as a process's environment, for benches that run the api and worker as processes of their own. */
export function benchEnv(settings: BenchSettings, more: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...Object.fromEntries(Object.entries(settings).map(([name, value]) => [name, String(value)])), ...more };
}

export interface BenchDeployment {
  settings: BenchSettings;
  config: AppConfig;
  /** Removes the deployment's containers (by label) and drops its database; each step runs even if another failed. */
  close(): Promise<void>;
}

/**
 * A migrated database for a bench deployment with its license activated (benchLicenseKey), as a licensed customer
 * runs the product: staging, casting and the rest are never refused on the free tier. Benches that run the api and
 * worker as processes of their own start them with benchEnv(settings), which trusts the license's issuer.
 */
export async function benchDeployment(kind?: string): Promise<BenchDeployment> {
  const settings = benchSettings(kind);
  const [{ loadConfig }, { dropDatabase, migrate }, { LicensingService }] = await Promise.all([import('@ws/common'), import('@ws/database'), import('@ws/licensing')]);
  const config = Object.assign(loadConfig(), settings);
  const close = untilClosed(() => closeAll([() => removeContainers(settings.DEPLOYMENT_ID), () => dropDatabase(config, settings.DATABASE_NAME)]));
  try {
    await migrate(config, settings.DATABASE_NAME);
    await withSetupApi(settings, (setup) => setup.get(LicensingService).activate({ activation_key: benchLicenseKey(settings) }));
  } catch (err) {
    await close();
    throw err;
  }
  return { settings, config, close };
}

export interface BenchApi extends BenchDeployment {
  api: NestFastifyApplication;
  /** The api's address on loopback (empty when it was not asked to listen). */
  base: string;
  worker?: INestApplicationContext;
}

/**
 * An in-process api (listening on a loopback port unless `listen: false`) and, with `worker`, an in-process
 * worker on a fresh bench deployment. close() stops them, then removes containers and the database.
 */
export async function startBenchApi(options: { worker?: boolean; listen?: boolean; kind?: string; settings?: Partial<AppConfig> } = {}): Promise<BenchApi> {
  const deployment = await benchDeployment(options.kind);
  const stops: Array<() => Promise<unknown>> = [];
  const close = untilClosed(() => closeAll([...[...stops].reverse(), deployment.close]));
  try {
    const { createApi } = await import('../apps/api/src/bootstrap');
    const api = await createApi({ ...deployment.settings, ...options.settings, API_PORT: 0 });
    stops.push(() => api.close());
    let base = '';
    if (options.listen ?? true) {
      await api.listen(0, '127.0.0.1');
      base = `http://127.0.0.1:${(api.getHttpServer().address() as AddressInfo).port}`;
    } else {
      await api.init();
    }
    let worker: INestApplicationContext | undefined;
    if (options.worker) {
      const { createWorker } = await import('../apps/worker/src/bootstrap');
      const started = await createWorker({ ...deployment.settings, ...options.settings });
      stops.push(() => started.close());
      worker = started;
    }
    return { ...deployment, api, base, worker, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Runs `fn` on an in-process api that does not listen (registration through the services), then closes it. */
export async function withSetupApi<T>(settings: BenchSettings, fn: (api: NestFastifyApplication) => Promise<T>): Promise<T> {
  const { createApi } = await import('../apps/api/src/bootstrap');
  const api = await createApi(settings);
  try {
    await api.init();
    return await fn(api);
  } finally {
    await api.close();
  }
}

/** Integrator credentials: `api_key` and `api_key_secret` of a Global Admin key. */
export interface BenchAuth {
  api_key: string;
  api_key_secret: string;
}

/**
 * Registers the default zone, this machine's Docker as server `local` (64 cores, 256 GiB unless told) and the
 * image, and makes a Global Admin API key.
 */
export async function registerLocalDesktop(app: INestApplicationContext, image: ImageDefinition, server: { cores: number; memory: number } = { cores: 64, memory: 256 * 1024 ** 3 }) {
  const [{ ZonesService }, { ServersService }, { ImagesService }, { ApiKeysService }] = await Promise.all([import('@ws/zones'), import('@ws/servers'), import('@ws/images'), import('@ws/auth')]);
  const zone = await app.get(ZonesService).ensure('default');
  const localServer = await app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, ...server });
  const img = await app.get(ImagesService).upsert(image);
  const { key, secret } = await app.get(ApiKeysService).create({ name: 'bench', permissions: ['Global Admin'] });
  const auth: BenchAuth = { api_key: key.apiKey, api_key_secret: secret };
  return { zone, server: localServer, image: img, key, auth };
}

/** Ids of every container, running or not, labelled with the deployment id. */
export function deploymentContainers(deploymentId: string): string[] {
  return execFileSync('docker', ['ps', '-aq', '--filter', `label=workspace-server.deployment-id=${deploymentId}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
}

/** Removes every container labelled with the deployment id. */
export function removeContainers(deploymentId: string): void {
  const ids = deploymentContainers(deploymentId);
  if (ids.length) execFileSync('docker', ['rm', '-f', ...ids], { stdio: 'ignore' });
}

/** Teardowns not run yet, oldest first: run on SIGTERM or SIGINT (bench.sh's per-bench timeout, Ctrl-C). */
const openTeardowns = new Set<() => Promise<void>>();
let stopSignalsHandled = false;

/**
 * `close` as a teardown that also runs when the process is told to stop: a bench stopped by its timeout still
 * removes its containers and drops its database. Runs once, whichever comes first.
 */
function untilClosed(close: () => Promise<void>): () => Promise<void> {
  if (!stopSignalsHandled) {
    stopSignalsHandled = true;
    let stopping = false;
    for (const [signal, status] of [['SIGTERM', 143], ['SIGINT', 130]] as const) {
      // `on`, not `once`: an in-process api's shutdown hook sends the signal again after closing itself, which
      // must not end the process before the containers and database are gone.
      process.on(signal, () => {
        if (stopping) return;
        stopping = true;
        console.error(`${signal}: tearing down the bench deployment`);
        void closeAll([...openTeardowns].reverse()).catch((err: Error) => console.error(err.message)).finally(() => process.exit(status));
      });
    }
  }
  let closing: Promise<void> | undefined;
  const teardown = () => {
    openTeardowns.delete(teardown);
    return (closing ??= close());
  };
  openTeardowns.add(teardown);
  return teardown;
}

/**
 * Runs `cleanup` when the bench is interrupted (SIGINT, SIGTERM: a Ctrl-C, bench.sh's timeout) before the process
 * exits, so what it started outside this process (a second dockerd, worker processes, containers) does not outlive
 * it; answers the cleanup as a teardown that runs once, whichever comes first.
 */
export function cleanUpOnSignal(cleanup: () => Promise<unknown>): () => Promise<void> {
  return untilClosed(async () => {
    await cleanup();
  });
}

/** Runs every step, in order, even after one failed; rethrows the first failure at the end. */
async function closeAll(steps: Array<() => unknown>): Promise<void> {
  let failure: unknown;
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure) throw failure;
}
