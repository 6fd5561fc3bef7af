import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { AppConfig } from '@ws/common';
import { appendSuiteLog, freePort, recordSecret, TestApi, TestKey, waitFor } from './harness';

const ROOT = resolve(__dirname, '../..');
/** Compiled api entry point: `npm test` builds dist/ first. */
const API_JS = resolve(ROOT, process.env.WS_TEST_API_JS ?? 'dist/apps/api/src/main.js');

/** The compiled api as a real process, its standard output kept: what an operator's log collector reads. */
class ApiProcess {
  output = '';
  private exited = false;

  constructor(readonly child: ChildProcess) {
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on('data', (chunk: Buffer) => {
        this.output += chunk.toString();
        appendSuiteLog(chunk);
      });
    }
    child.once('exit', () => (this.exited = true));
  }

  static spawn(settings: Partial<AppConfig>, extra: Record<string, string>): ApiProcess {
    const env: Record<string, string> = { ...(process.env as Record<string, string>), NODE_PATH: resolve(ROOT, 'node_modules') };
    for (const [name, value] of Object.entries(settings)) if (value !== undefined && value !== null) env[name] = String(value);
    Object.assign(env, extra);
    return new ApiProcess(spawn(process.execPath, [API_JS], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  /** Every line of standard output that is a JSON object (all of them, when LOG_FORMAT=json). */
  lines(): Array<Record<string, unknown>> {
    return this.output.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  async stop(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise((done) => this.child.once('exit', done));
    this.child.kill('SIGTERM');
    await Promise.race([gone, new Promise((done) => setTimeout(done, 20_000))]);
    if (!this.exited) this.child.kill('SIGKILL');
  }
}

/**
 * Structured logs of a real api process: JSON lines with level, time and msg; a request's line carries its request
 * id (an incoming X-Request-Id kept, else one made, echoed either way); secrets sent in bodies and headers never
 * appear.
 */
describe('JSON logs', () => {
  let api: TestApi;
  let proc: ApiProcess;
  let base: string;
  let admin: TestKey;

  beforeAll(async () => {
    api = await TestApi.start();
    admin = await api.key(['Global Admin']);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    proc = ApiProcess.spawn(api.settings, { API_PORT: String(port), LOG_LEVEL: 'log', LOG_FORMAT: 'json', METRICS_PORT: '0' });
    await waitFor('the api process listening', async () => {
      if (proc.output.includes('"level":"error"')) throw new Error(`api failed to start:\n${proc.output}`);
      return (await fetch(`${base}/api/health/live`).then((r) => r.ok, () => false)) ? true : undefined;
    }, 60_000, 100);
  });
  afterAll(async () => {
    await proc?.stop();
    await api?.close();
  });

  const post = (operation: string, body: object, headers: Record<string, string> = {}) =>
    fetch(`${base}/api/public/${operation}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

  it('writes one JSON object a line, with level, time and msg', async () => {
    expect((await fetch(`${base}/api/health/live`)).status).toBe(200);
    const lines = await waitFor('log lines', async () => (proc.lines().length > 1 ? proc.lines() : undefined), 10_000, 50);
    for (const line of lines) {
      expect(line).toEqual(expect.objectContaining({ level: expect.stringMatching(/^(trace|debug|info|warn|error|fatal)$/), time: expect.any(String), msg: expect.any(String) }));
      expect(Number.isNaN(Date.parse(line.time as string))).toBe(false);
    }
  });

  it("keeps an incoming X-Request-Id, echoes it, and puts it on the request's line", async () => {
    const res = await post('get_users', admin, { 'x-request-id': 'req-logs-e2e-1' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('req-logs-e2e-1');
    const line = await waitFor('the request line', async () => proc.lines().find((l) => l.request_id === 'req-logs-e2e-1' && (l.res as { status_code?: number })?.status_code === 200), 10_000, 50);
    expect(line).toMatchObject({ level: 'info', req: { method: 'POST', url: '/api/public/get_users' }, responseTime: expect.any(Number), operation: 'get_users', api_key_id: expect.stringMatching(/^[0-9a-f]{32}$/) });
  });

  it('makes a request id when none (or a malformed one) comes, and echoes it', async () => {
    for (const headers of [{}, { 'x-request-id': 'has spaces and "quotes"' }] as Array<Record<string, string>>) {
      const res = await post('get_users', admin, headers);
      const id = res.headers.get('x-request-id');
      expect(id).toMatch(/^[0-9a-f]{32}$/);
      await waitFor('the request line', async () => proc.lines().find((l) => l.request_id === id), 10_000, 50);
    }
  });

  it('never writes a secret sent in a body or a header', async () => {
    const secrets = ['S3cret-password-never-logged-1', 'S3cret-key-secret-never-logged-2', 'S3cret-basic-never-logged-3', 'S3cret-cookie-never-logged-4'];
    secrets.forEach(recordSecret);
    await post('create_user', { ...admin, target_user: { username: 'log-secret', password: secrets[0] } }, { 'x-request-id': 'req-logs-secret' });
    await post('get_users', { api_key: admin.api_key, api_key_secret: secrets[1] }, { 'x-request-id': 'req-logs-secret-2' });
    await post('get_users', {}, { authorization: `Basic ${Buffer.from(`${admin.api_key}:${secrets[2]}`).toString('base64')}`, cookie: `session=${secrets[3]}` });
    // A malformed body whose parse error could echo it.
    await fetch(`${base}/api/public/get_users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"api_key_secret": "${secrets[1]}", ` });
    await waitFor('the lines of those requests', async () => (proc.lines().some((l) => l.request_id === 'req-logs-secret-2') ? true : undefined), 10_000, 50);
    for (const secret of secrets) expect(proc.output).not.toContain(secret);
    expect(proc.output).not.toContain(admin.api_key_secret);
  });
});
