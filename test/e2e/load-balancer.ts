import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
/** Compiled api entry point: `npm test` builds dist/ first; WS_TEST_API_JS points elsewhere while developing. */
export const API_JS = resolve(ROOT, process.env.WS_TEST_API_JS ?? 'dist/apps/api/src/main.js');

/** Debian's haproxy (scripts/ensure-test-tools.sh installs it); run as a plain process, never as a service. */
export function haproxyBinary(): string {
  for (const path of ['/usr/sbin/haproxy', '/usr/bin/haproxy']) {
    try {
      execFileSync(path, ['-v'], { stdio: 'ignore' });
      return path;
    } catch {
      // try the next place
    }
  }
  throw new Error('haproxy is not installed: run scripts/ensure-test-tools.sh');
}

/** Bounded poll (the helpers here are shared by the e2e suite and the bench, which have harnesses of their own). */
async function poll<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; Date.now() < deadline && attempt < 100_000; attempt++) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** The compiled api as a real process on a loopback port of its own (a replica behind the balancer). */
export class ApiReplica {
  output = '';
  exitCode: number | null | undefined = undefined;
  readonly exited: Promise<void>;

  private constructor(readonly name: string, readonly port: number, readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((done) => child.once('exit', (code) => {
      this.exitCode = code;
      done();
    }));
  }

  /**
   * `settings`: the test's database, Redis prefix and deployment id (as the in-process api uses), as environment
   * strings. `entry`: the compiled api (the bench, itself compiled under dist/, passes its own).
   */
  static spawn(name: string, port: number, settings: Record<string, unknown>, extra: Record<string, string> = {}, entry = API_JS): ApiReplica {
    const env: Record<string, string> = { ...(process.env as Record<string, string>), NODE_PATH: resolve(ROOT, 'node_modules') };
    for (const [key, value] of Object.entries(settings)) if (value !== undefined && value !== null) env[key] = String(value);
    Object.assign(env, { API_PORT: String(port), API_HOST: '127.0.0.1', METRICS_PORT: '0' }, extra);
    return new ApiReplica(name, port, spawn(process.execPath, [entry], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get alive(): boolean {
    return this.exitCode === undefined;
  }

  /** Until /api/health answers 200 (PostgreSQL and Redis reachable), bounded. */
  ready(timeoutMs = 60_000): Promise<true> {
    return poll(`api replica ${this.name} healthy`, async () => {
      if (!this.alive) throw new Error(`api replica ${this.name} exited while starting:\n${this.output}`);
      return (await fetch(`${this.base}/api/health`)).ok ? true : undefined;
    }, timeoutMs);
  }

  /** SIGKILL (a crash) or SIGTERM (a graceful stop, SIGKILL after `timeoutMs`). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 20_000): Promise<void> {
    if (!this.alive) return;
    this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise((done) => (timer = setTimeout(done, timeoutMs)))]);
    clearTimeout(timer);
    if (this.alive) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

export interface BalancerOptions {
  /** Loopback port HAProxy listens on. */
  port: number;
  /** The replicas: name and loopback port. */
  servers: Array<{ name: string; port: number }>;
  /** Milliseconds between health checks of each server (`inter`); 2 failures mark it down, 2 successes up. */
  checkIntervalMs?: number;
  /**
   * Test only: a request carrying `X-Test-Replica: <name>` goes to that server (when it is up), so a suite can
   * send the same request to each replica in turn. Not part of the configuration an operator uses.
   */
  pinHeader?: boolean;
}

/**
 * The HAProxy configuration this repository recommends in front of api replicas (docs/scaling.md shows it):
 * round-robin over the replicas, health checks on /api/health, websockets passed through (`timeout tunnel`),
 * the client's address forwarded (X-Forwarded-For; the replicas list the balancer in TRUSTED_PROXIES), and retries
 * that never repeat a request with a side effect: every request is retried on another server when the connection
 * failed before it was sent (`retries`, `option redispatch`); a read (`get_*` operations, health) is also
 * retried when the server died after receiving it; anything else in flight on a dying server answers 502.
 */
export function haproxyConfig(options: BalancerOptions): string {
  const inter = options.checkIntervalMs ?? 1000;
  const pins = options.pinHeader
    ? options.servers.map((s) => `    use-server ${s.name} if { req.hdr(x-test-replica) -m str ${s.name} }`)
    : [];
  return [
    'global',
    '    maxconn 4096',
    '',
    'defaults',
    '    mode http',
    '    option httplog',
    '    timeout connect 2s',
    '    timeout client 60s',
    '    timeout server 60s',
    '    # An open websocket (a stream, audio) is a tunnel: idle up to an hour, not the 60 s of a request.',
    '    timeout tunnel 1h',
    '    timeout http-request 10s',
    '    timeout http-keep-alive 10s',
    '',
    'frontend api_in',
    `    bind 127.0.0.1:${options.port}`,
    '    option forwardfor',
    '    default_backend api_replicas',
    '',
    'backend api_replicas',
    '    balance roundrobin',
    '    option httpchk GET /api/health',
    '    http-check expect status 200',
    `    default-server check inter ${inter} fall 2 rise 2`,
    '    retries 3',
    '    option redispatch 1',
    '    retry-on conn-failure empty-response response-timeout',
    '    # Past a connection failure, only reads are repeated: a write may already have happened.',
    '    acl read_only path_beg /api/public/get_ /api/health',
    '    http-request disable-l7-retry if !read_only',
    '    http-response set-header X-Served-By %s',
    ...pins,
    ...options.servers.map((s) => `    server ${s.name} 127.0.0.1:${s.port}`),
    '',
  ].join('\n');
}

/** HAProxy as a child process with a configuration file this helper writes; stop() ends it and removes the file. */
export class LoadBalancer {
  output = '';
  private exitCode: number | null | undefined = undefined;
  private readonly exited: Promise<void>;

  private constructor(readonly options: BalancerOptions, readonly configText: string, private readonly dir: string, readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((done) => child.once('exit', (code) => {
      this.exitCode = code;
      done();
    }));
  }

  static async start(options: BalancerOptions): Promise<LoadBalancer> {
    const binary = haproxyBinary();
    const dir = mkdtempSync(join(tmpdir(), 'ws-haproxy-'));
    const configText = haproxyConfig(options);
    const file = join(dir, 'haproxy.cfg');
    writeFileSync(file, configText);
    execFileSync(binary, ['-c', '-q', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
    // -db: stay in the foreground, no daemon; -W is not used: one process, killed by its pid.
    const lb = new LoadBalancer(options, configText, dir, spawn(binary, ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] }));
    await poll('haproxy listening', async () => {
      if (lb.exitCode !== undefined) throw new Error(`haproxy exited:\n${lb.output}`);
      return (await fetch(`${lb.base}/api/health/live`)).status > 0 ? true : undefined;
    }, 30_000);
    return lb;
  }

  get base(): string {
    return `http://127.0.0.1:${this.options.port}`;
  }

  /** Until round-robin reaches each of `names` (each server up in HAProxy), bounded. */
  async serving(names: string[], timeoutMs = 30_000): Promise<void> {
    const seen = new Set<string>();
    await poll(`haproxy serving ${names.join(', ')}`, async () => {
      const res = await fetch(`${this.base}/api/health/live`);
      if (res.ok) seen.add(res.headers.get('x-served-by') ?? '');
      return names.every((n) => seen.has(n)) ? true : undefined;
    }, timeoutMs, 50);
  }

  async stop(): Promise<void> {
    if (this.exitCode === undefined) {
      this.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.exited, new Promise((done) => (timer = setTimeout(done, 10_000)))]);
      clearTimeout(timer);
      if (this.exitCode === undefined) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
