import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { basename, join, resolve } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { createApi } from '../../apps/api/src/bootstrap';
import { createWorker } from '../../apps/worker/src/bootstrap';
import { DockerHost, LABELS } from '@ws/agent';
import { ApiKeysService, Permission } from '@ws/auth';
import { AppConfig, loadConfig, randomSecret } from '@ws/common';
import { dropDatabase } from '@ws/database';
import { LICENSE_FEATURES } from '@ws/licensing';
import { createClient, OperationName, RequestOf, ResponseOf, WorkspaceApiError, WorkspaceClient } from '@workspace-server/client';
import { createSuiteDatabase } from './suite-database';

export interface TestKey {
  api_key: string;
  api_key_secret: string;
}

/** An operation's outcome through the client: 200 and the typed answer, or the error's status and body. */
export interface Outcome<T> {
  status: number;
  body: T & { error_message?: string };
}

/**
 * Suites that are not about licensing run past the free tier (5 sessions, no staging or casting): a large session
 * limit and every feature. A suite that sets any licensing setting itself (LICENSE_PUBLIC_KEYS, UNLICENSED_*) gets
 * the product's own defaults for the rest, so only the licensing suites exercise the real free tier.
 */
export const TEST_LICENSE_DEFAULTS: Partial<AppConfig> = { UNLICENSED_SESSION_LIMIT: 1000, UNLICENSED_FEATURES: LICENSE_FEATURES.join(',') };
const LICENSING_SETTINGS: ReadonlyArray<keyof AppConfig> = ['LICENSE_PUBLIC_KEYS', 'UNLICENSED_SESSION_LIMIT', 'UNLICENSED_FEATURES'];

/** A live api on a database and Redis prefix of its own; close() drops both. */
export class TestApi {
  worker: INestApplicationContext | null = null;
  private baseUrl: string | null = null;
  private readonly clients = new Map<string, WorkspaceClient>();

  private constructor(
    readonly app: NestFastifyApplication,
    readonly config: AppConfig,
    readonly database: string,
    /** What the api and worker were started with: a worker started later must use the same. */
    readonly settings: Partial<AppConfig>,
  ) {}

  /** `worker: true` also runs the queue workers in this process. */
  static async start(overrides: Partial<AppConfig> = {}, options: { worker?: boolean } = {}): Promise<TestApi> {
    const suffix = randomSecret(5);
    const database = `ws_e2e_${suffix}`;
    const licensing = LICENSING_SETTINGS.some((name) => name in overrides) ? {} : TEST_LICENSE_DEFAULTS;
    const settings: Partial<AppConfig> = {
      DATABASE_NAME: database, REDIS_PREFIX: `wse2e-${suffix}`, DEPLOYMENT_ID: `e2e-${suffix}`, DATABASE_POOL_SIZE: 4, LOG_LEVEL: 'warn',
      // Many suites run at once on one machine: no metrics listener unless a suite asks (metrics.e2e-spec).
      METRICS_PORT: 0,
      // Suites send many refused credentials from one address on purpose; auth-rate-limit.e2e-spec sets real limits.
      AUTH_FAILURES_PER_ADDRESS: 1_000_000, AUTH_FAILURES_PER_KEY: 1_000_000,
      // As `npm start` makes one: secrets at rest (server image passwords, egress and webhook secrets) are sealed.
      SERVER_CREDENTIALS_KEY: `e2e-credentials-key-${suffix}-0123456789abcdef`,
      ...licensing,
      ...overrides,
    };
    // The in-process CLI (cli-runner) reads this file's environment: the same licensing defaults, unless the suite
    // set its own (each test file has its own process.env under jest).
    for (const [name, value] of Object.entries(licensing)) process.env[name] ??= String(value);
    const config = Object.assign(loadConfig(), settings);
    await createSuiteDatabase(config, database);
    const app = await createApi({ ...settings, ...suiteLogging(settings) });
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    const api = new TestApi(app, config, database, settings);
    if (options.worker) await api.startWorker();
    return api;
  }

  /** Listens on an ephemeral loopback port (websockets need a real server); answers the base url. */
  async listen(): Promise<string> {
    if (this.baseUrl) return this.baseUrl;
    await this.app.listen(0, '127.0.0.1');
    const address = this.app.getHttpServer().address() as { port: number };
    this.baseUrl = `http://127.0.0.1:${address.port}`;
    return this.baseUrl;
  }

  /**
   * The typed client (@workspace-server/client) with `key`, over HTTP on a loopback port, as an integrator calls the
   * api: a request or answer that drifts from the OpenAPI document fails the type check or the test. One attempt
   * per call (the suites assert 429 and 503 themselves; the client's retries have their own unit tests).
   */
  async client(key: TestKey): Promise<WorkspaceClient> {
    const base = await this.listen();
    let client = this.clients.get(key.api_key);
    if (!client) {
      client = createClient({ baseUrl: base, apiKey: key.api_key, apiKeySecret: key.api_key_secret, retry: { attempts: 1 }, timeoutMs: 300_000 });
      this.clients.set(key.api_key, client);
    }
    return client;
  }

  /** An operation through the typed client, as {status, body} (use `call` only to send what the client cannot: malformed bodies). */
  async op<N extends OperationName>(operation: N, key: TestKey, body?: RequestOf<N>): Promise<Outcome<ResponseOf<N>>> {
    const client = await this.client(key);
    recordSecretsIn(body);
    try {
      const answer = await client.call(operation, body);
      recordSecretsIn(answer);
      return { status: 200, body: answer as Outcome<ResponseOf<N>>['body'] };
    } catch (err) {
      if (err instanceof WorkspaceApiError) return { status: err.status, body: err.body as Outcome<ResponseOf<N>>['body'] };
      throw err;
    }
  }

  /**
   * A second api process on this api's database and Redis prefix, as a replica behind a load balancer would
   * be (its own PostgreSQL LISTEN connection and pools). Close it before this api.
   */
  async replica(): Promise<NestFastifyApplication> {
    const app = await createApi({ ...this.settings, ...suiteLogging(this.settings) });
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    return app;
  }

  async startWorker(overrides: Partial<AppConfig> = {}): Promise<void> {
    const settings = { ...this.settings, ...overrides };
    this.worker = await createWorker({ ...settings, ...suiteLogging(settings) });
  }

  async stopWorker(): Promise<void> {
    await this.worker?.close();
    this.worker = null;
  }

  /** Containers of this test's deployment on the local engine. */
  containers() {
    return localDocker().listByLabels({ [LABELS.deploymentId]: this.config.DEPLOYMENT_ID });
  }

  async key(permissions: Permission[], options: { readOnly?: boolean; expiresAt?: Date } = {}): Promise<TestKey> {
    const { key, secret } = await this.app.get(ApiKeysService).create({ name: 'test', permissions, ...options });
    recordSecret(secret);
    return { api_key: key.apiKey, api_key_secret: secret };
  }

  /** POST /api/public/<operation> with the key in the body, as an integrator calls it. */
  call(operation: string, key: TestKey | null, body: Record<string, unknown> = {}) {
    recordSecretsIn(body);
    const req = request(this.app.getHttpServer())
      .post(`/api/public/${operation}`)
      .set('content-type', 'application/json')
      .send({ ...(key ?? {}), ...body });
    req.on('response', (res: { body?: unknown }) => recordSecretsIn(res.body));
    return req;
  }

  raw() {
    return request(this.app.getHttpServer());
  }

  async close(): Promise<void> {
    await this.stopWorker();
    await this.app.close();
    for (const c of await this.containers().catch(() => [])) await localDocker().remove(c.id).catch(() => undefined);
    await dropDatabase(this.config, this.database);
  }
}

/**
 * The log-secrets check (issue 23): under `npm test` (WS_TEST_LOG_DIR set), every in-process api and worker of a
 * suite appends its JSON log lines (LOG_LEVEL `log` unless the suite chose one) to `<dir>/<suite>.log`, child
 * processes' output is appended there too (appendSuiteLog), and every secret the suite made or saw (api key
 * secrets, passwords, session JWTs, also those inside urls) goes to `<dir>/<suite>.secrets`, one JSON string a line.
 * scripts/check-log-secrets.js, the last step of `npm test`, fails if any secret is in any log. Outside npm test
 * nothing is written and logs go to standard output as before.
 */
const LOG_DIR = process.env.WS_TEST_LOG_DIR ? resolve(__dirname, '../..', process.env.WS_TEST_LOG_DIR) : null;
/** Fields whose values are secrets (in requests the tests send and answers they get). */
const SECRET_FIELDS = new Set(['api_key_secret', 'password', 'new_password', 'session_jwt', 'vpn_private_key', 'mesh_key', 'private_key']);
const recorded = new Set<string>();
const JWT = /eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+/g;

function suiteFile(ext: string): string | null {
  if (!LOG_DIR) return null;
  // jest's expect (a global under jest; this file is also compiled by the build, which has no jest types).
  const testPath = (globalThis as { expect?: { getState(): { testPath?: string } } }).expect?.getState().testPath ?? 'unknown';
  mkdirSync(LOG_DIR, { recursive: true });
  return join(LOG_DIR, `${basename(testPath).replace(/\.e2e-spec\.ts$/, '')}.${ext}`);
}

/** What the harness adds to an in-process api's or worker's settings: its suite's log file. */
function suiteLogging(settings: Partial<AppConfig>): Partial<AppConfig> {
  const file = suiteFile('log');
  return file ? { LOG_FILE: file, LOG_LEVEL: settings.LOG_LEVEL && settings.LOG_LEVEL !== 'warn' ? settings.LOG_LEVEL : 'log' } : {};
}

/** Appends a child process's output (a worker or api run as its own process) to the suite's log file. */
export function appendSuiteLog(chunk: Buffer | string): void {
  const file = suiteFile('log');
  if (file) appendFileSync(file, chunk);
}

/** Records a secret the suite used; the final check looks for it in every log of the run. */
export function recordSecret(value: unknown): void {
  // Short or masked values (`****`) would match by chance: not secrets worth looking for.
  if (typeof value !== 'string' || value.length < 8 || /^\*+$/.test(value) || recorded.has(value)) return;
  recorded.add(value);
  const file = suiteFile('secrets');
  if (file) appendFileSync(file, `${JSON.stringify(value)}\n`);
}

/** Records the value of every secret field in a request or an answer, at any depth (bounded). */
export function recordSecretsIn(value: unknown, depth = 0): void {
  if (!LOG_DIR || depth > 8 || value === null) return;
  // Session JWTs also travel inside strings (workspace_url, login links).
  if (typeof value === 'string') for (const jwt of value.match(JWT) ?? []) recordSecret(jwt);
  if (typeof value !== 'object') return;
  for (const [name, inner] of Object.entries(value as Record<string, unknown>)) {
    if (SECRET_FIELDS.has(name)) recordSecret(inner);
    else recordSecretsIn(inner, depth + 1);
  }
}

/** A loopback port nobody listens on right now (for a server that must be named before it starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Polls `check` until it returns a value other than undefined, within a bounded time. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; Date.now() < deadline && attempt < 100_000; attempt++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * A shell command that prints "open" when a TCP connection to host:port succeeds within 5 s, then `exit=<code>`
 * (bash's /dev/tcp, bounded by `timeout`): the isolation suites run it inside containers.
 */
export const tcpProbeCommand = (host: string, port: number) => `timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port} && echo open' 2>&1; echo "exit=$?"`;

/**
 * Whether a prerequisite the machine may lack (a program a suite runs) is here. On a developer's machine a missing
 * one skips what needs it (the caller's describe.skip or check); under CI=true (.ci/run) it fails the run instead,
 * naming what is missing and how to get it, so a CI machine without it cannot pass by skipping.
 */
export function prerequisite(present: boolean, what: string, remedy: string): boolean {
  if (present) return true;
  if (process.env.CI === 'true') throw new Error(`${what} is missing and CI=true, where a missing prerequisite fails instead of skipping: ${remedy}`);
  return false;
}

export const HEX32 = /^[0-9a-f]{32}$/;
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$/;

export const localDocker = () => DockerHost.fromEndpoint({ endpoint: 'unix:///var/run/docker.sock', name: 'local' });

/** An image the repo's scripts build: npm test builds it and passes the tag in `envName`; a direct jest run builds or finds it. */
function builtImage(envName: string, script: string): string {
  const passed = process.env[envName];
  if (passed) return passed;
  // The early group runs while npm test builds the images: a suite there that needs one belongs in another group.
  if (process.env.WS_E2E_GROUP === 'early') throw new Error(`${envName}: this suite needs an image, so it cannot be in the early group (test/e2e/groups.js)`);
  const out = execFileSync('bash', [script], { cwd: `${__dirname}/../..`, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return (process.env[envName] = out.trim().split('\n').pop() as string);
}

/** The reference desktop image. */
export const desktopImage = () => builtImage('WS_TEST_DESKTOP_IMAGE', 'scripts/build-desktop-image.sh');
/** The reference browser image. */
export const browserImage = () => builtImage('WS_TEST_BROWSER_IMAGE', 'scripts/build-browser-image.sh');
/** The egress sidecar image (wireguard-go, wireguard-tools, openvpn, nebula, iptables, busybox); also the test gateways'. */
export const egressImage = () => builtImage('WS_TEST_EGRESS_IMAGE', 'scripts/build-egress-image.sh');
/** Real RDP (xrdp) and SSH (openssh-server) servers for the server-session tests: `docker run … <tag> rdp|ssh`. */
export const testServersImage = () => builtImage('WS_TEST_SERVERS_IMAGE', 'scripts/build-test-server-images.sh');
