import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { parseId } from '@ws/common';
import { PgNotifications } from '@ws/database';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { freePort, prerequisite, TestApi, TestKey, waitFor } from './harness';
import { PrivateRedis, REDIS_SERVER } from './private-redis';

/**
 * Dependency outages on real services: a private PostgreSQL cluster and a private redis-server (the shared
 * ones serve other tests), stopped or paused under a live api. Operations and readiness must answer 503 with
 * Retry-After within DEPENDENCY_TIMEOUT_MS (never 500, never a hang), and recover by themselves.
 */
const run = promisify(execFile);
const POSTGRES_BIN = findPostgresBin();
const DEPENDENCY_TIMEOUT_MS = 2000;
/** Far above the bound, far below the outage: a request that waits for the dependency to return fails it. */
const NO_HANG_MS = 20_000;
/** Longer than NO_HANG_MS, so a request that waited for the pause to end cannot pass as an answer. */
const REDIS_PAUSE_MS = 30_000;

const describeIfBinaries = prerequisite(
  Boolean(POSTGRES_BIN && REDIS_SERVER),
  [POSTGRES_BIN ? '' : 'PostgreSQL\'s server binaries (/usr/lib/postgresql/<version>/bin)', REDIS_SERVER ? '' : 'redis-server'].filter(Boolean).join(' and '),
  'scripts/ensure-services.sh installs Debian\'s postgresql and redis-server',
) ? describe : describe.skip;

describeIfBinaries('dependency faults: PostgreSQL stopped or stalled, Redis paused', () => {
  let postgres: PrivatePostgres;
  let redis: PrivateRedis;
  let api: TestApi;
  let baseUrl: string;
  let admin: TestKey;
  let userId: string;
  let imageId: string;

  beforeAll(async () => {
    postgres = await PrivatePostgres.start(POSTGRES_BIN as string);
    redis = await PrivateRedis.start();
    api = await TestApi.start({ DATABASE_PORT: postgres.port, REDIS_URL: redis.url, DEPENDENCY_TIMEOUT_MS });
    baseUrl = await api.listen();
    // request_workspace only records and enqueues here (no worker runs), so the image needs no container and
    // the server's capacity is only rows: room for every workspace the tests request (some answered 503 are recorded).
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 256 * 1024 ** 3 });
    const image = await api.app.get(ImagesService).upsert({ name: 'example/never-started:1', friendlyName: 'Desktop', cores: 0.5, memory: 256 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
    imageId = image.id.replace(/-/g, '');
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'outage' } })).body.user.user_id;
  });

  afterAll(async () => {
    try {
      await postgres?.thaw();
      await postgres?.start().catch(() => undefined);
      await api?.close();
    } finally {
      await redis?.stop();
      await postgres?.destroy();
    }
  });

  const liveWorkspaces = async () =>
    Number((await api.app.get(DataSource).query(`SELECT count(*) AS n FROM workspaces WHERE user_id = $1 AND status <> 'deleted'`, [parseId(userId)]))[0].n);
  const requestWorkspace = () => api.call('request_workspace', admin, { user_id: userId, image_id: imageId }).timeout(NO_HANG_MS);
  const health = () => api.raw().get('/api/health').timeout(NO_HANG_MS);
  const expectUnavailable = (res: { status: number; headers: Record<string, string>; body: { error_message?: unknown } }, dependency: RegExp) => {
    expect({ status: res.status, retryAfter: res.headers['retry-after'] }).toEqual({ status: 503, retryAfter: expect.stringMatching(/^[1-9][0-9]*$/) });
    expect(res.body.error_message).toEqual(expect.stringMatching(dependency));
  };

  it('PostgreSQL stopped: operations, browser client, stream admission and readiness answer 503 with Retry-After; all recover without a restart', async () => {
    const before = await requestWorkspace();
    expect(before.status).toBe(200);
    const { workspace_id: workspaceId, session_token: sessionJwt } = before.body;
    expect((await health()).status).toBe(200);
    await waitFor('LISTEN connection', async () => (api.app.get(PgNotifications).listening ? true : undefined), 30_000);

    await postgres.stop();

    expectUnavailable(await api.call('get_users', admin).timeout(NO_HANG_MS), /PostgreSQL/);
    expectUnavailable(await api.call('create_user', admin, { target_user: { username: 'during-outage' } }).timeout(NO_HANG_MS), /PostgreSQL/);
    // The Idempotency-Key store is PostgreSQL too: the same 503.
    expectUnavailable(await api.call('create_user', admin, { target_user: { username: 'keyed-outage' } }).set('Idempotency-Key', 'pg-outage-1').timeout(NO_HANG_MS), /PostgreSQL/);
    expectUnavailable(await requestWorkspace(), /PostgreSQL/);
    expectUnavailable(await api.raw().post('/api/client/connect').send({ session_jwt: sessionJwt, workspace_id: workspaceId }).timeout(NO_HANG_MS), /PostgreSQL/);
    const stream = await upgradeStatus(baseUrl, workspaceId, sessionJwt);
    expect({ status: stream.status, retryAfter: stream.retryAfter }).toEqual({ status: 503, retryAfter: expect.stringMatching(/^[1-9][0-9]*$/) });
    const unready = await health();
    expectUnavailable(unready, /PostgreSQL/);
    expect(unready.body.error_message).not.toMatch(/Redis/);
    // Liveness does not depend on PostgreSQL: the process must not be restarted for an outage.
    expect((await api.raw().get('/api/health/live').timeout(NO_HANG_MS)).status).toBe(200);

    await postgres.start();

    await waitFor('readiness after PostgreSQL returned', async () => ((await health()).status === 200 ? true : undefined), 60_000, 250);
    expect((await api.call('get_users', admin)).status).toBe(200);
    expect((await api.call('create_user', admin, { target_user: { username: 'after-outage' } })).status).toBe(200);
    const keyed = await api.call('create_user', admin, { target_user: { username: 'keyed-outage' } }).set('Idempotency-Key', 'pg-outage-1');
    expect({ status: keyed.status, replayed: keyed.headers['idempotent-replayed'] }).toEqual({ status: 200, replayed: undefined });
    expect((await requestWorkspace()).status).toBe(200);
    expect((await api.raw().post('/api/client/connect').send({ session_jwt: sessionJwt, workspace_id: workspaceId })).status).toBe(200);

    // The LISTEN connection came back and LISTENs again: a revocation by hand in SQL reaches this process's key
    // cache (which would otherwise serve the cached key for up to a minute).
    await waitFor('LISTEN connection after PostgreSQL returned', async () => (api.app.get(PgNotifications).listening ? true : undefined), 30_000);
    const revoked = await api.key(['Users View']);
    expect((await api.call('get_users', revoked)).status).toBe(200);
    await postgres.sql(api.database, "UPDATE api_keys SET expires_at = now() - interval '1 hour' WHERE api_key = $1", [revoked.api_key]);
    await waitFor('revocation notice', async () => ((await api.call('get_users', revoked)).status === 401 ? true : undefined), 20_000, 100);
  });

  it('PostgreSQL stalled (every server process stopped by SIGSTOP): operations and readiness answer 503 within the bound; all recover when it resumes', async () => {
    const before = await requestWorkspace();
    expect(before.status).toBe(200);
    const { workspace_id: workspaceId, session_token: sessionJwt } = before.body;
    expect((await health()).status).toBe(200);

    await postgres.freeze();
    try {
      // The server accepts TCP but answers nothing: only the client-side bounds can end these requests.
      expectUnavailable(await api.call('get_users', admin).timeout(NO_HANG_MS), /PostgreSQL/);
      expectUnavailable(await requestWorkspace(), /PostgreSQL/);
      const stream = await upgradeStatus(baseUrl, workspaceId, sessionJwt);
      expect(stream.status).toBe(503);
      const unready = await health();
      expectUnavailable(unready, /PostgreSQL/);
      expect(unready.body.error_message).not.toMatch(/Redis/);
      expect((await api.raw().get('/api/health/live').timeout(NO_HANG_MS)).status).toBe(200);
    } finally {
      await postgres.thaw();
    }

    await waitFor('readiness after PostgreSQL resumed', async () => ((await health()).status === 200 ? true : undefined), 60_000, 250);
    expect((await api.call('get_users', admin)).status).toBe(200);
    expect((await requestWorkspace()).status).toBe(200);
  });

  it('Redis paused: request_workspace and readiness answer 503 with Retry-After instead of waiting; both recover when the pause ends', async () => {
    expect((await requestWorkspace()).status).toBe(200);
    expect((await health()).status).toBe(200);

    const liveBefore = await liveWorkspaces();
    expect(await redis.pause(REDIS_PAUSE_MS)).toBe('OK');

    expectUnavailable(await requestWorkspace(), /Redis/);
    // Refused means refused: the recorded row was withdrawn, so a retry makes one workspace, not two.
    expect(await liveWorkspaces()).toBe(liveBefore);
    const unready = await health();
    expectUnavailable(unready, /Redis/);
    expect(unready.body.error_message).not.toMatch(/PostgreSQL/);
    expect((await api.raw().get('/api/health/live').timeout(NO_HANG_MS)).status).toBe(200);
    // Operations that need only PostgreSQL keep working.
    expect((await api.call('get_users', admin).timeout(NO_HANG_MS)).status).toBe(200);

    await waitFor('readiness after the pause', async () => ((await health()).status === 200 ? true : undefined), REDIS_PAUSE_MS + 60_000, 250);
    expect((await requestWorkspace()).status).toBe(200);
  });

  it('Redis stopped: request_workspace and readiness answer 503; the connection and the queue producers come back when it restarts', async () => {
    expect((await requestWorkspace()).status).toBe(200);

    const liveBefore = await liveWorkspaces();
    await redis.stop();

    expectUnavailable(await requestWorkspace(), /Redis/);
    // A 503 is not stored: the key is given back, so the retry after the outage runs the request (once).
    expectUnavailable(await requestWorkspace().set('Idempotency-Key', 'redis-outage-1'), /Redis/);
    expectUnavailable(await health(), /Redis/);
    expect((await api.call('get_users', admin).timeout(NO_HANG_MS)).status).toBe(200);

    await redis.restart();

    await waitFor('readiness after Redis restarted', async () => ((await health()).status === 200 ? true : undefined), 60_000, 250);
    expect((await requestWorkspace()).status).toBe(200);
    const retried = await requestWorkspace().set('Idempotency-Key', 'redis-outage-1');
    expect({ status: retried.status, replayed: retried.headers['idempotent-replayed'] }).toEqual({ status: 200, replayed: undefined });
    const replayed = await requestWorkspace().set('Idempotency-Key', 'redis-outage-1');
    expect({ status: replayed.status, replayed: replayed.headers['idempotent-replayed'], id: replayed.body.workspace_id }).toEqual({ status: 200, replayed: 'true', id: retried.body.workspace_id });
    expect(await liveWorkspaces()).toBe(liveBefore + 2);
  });
});

/** The status line (and Retry-After) the stream gateway answers a websocket upgrade with. */
function upgradeStatus(baseUrl: string, workspaceId: string, jwt: string): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${baseUrl}/api/stream/${workspaceId}/vnc`, {
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', Cookie: `ws_stream=${jwt}` },
      timeout: NO_HANG_MS,
    });
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined });
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, retryAfter: undefined });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to the upgrade within ${NO_HANG_MS} ms`)));
    req.on('error', reject);
    req.end();
  });
}

function findPostgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'pg_ctl'))).sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(root, versions[0], 'bin') : undefined;
}

/** A throwaway cluster on a loopback port, run as the postgres user (postgres refuses to run as root). */
class PrivatePostgres {
  private frozen: number[] = [];

  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
  ) {}

  static async start(bin: string): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'ws-faults-pg-'));
    const cluster = new PrivatePostgres(bin, dir, await freePort());
    if (process.getuid?.() === 0) await run('chown', ['postgres:postgres', dir]);
    await cluster.asPostgres('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await cluster.start();
    return cluster;
  }

  start(): Promise<unknown> {
    const options = `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c fsync=off -c full_page_writes=off -c synchronous_commit=off`;
    return this.asPostgres('pg_ctl', ['-D', join(this.dir, 'data'), '-l', join(this.dir, 'log'), '-w', '-t', '120', '-o', options, 'start']);
  }

  /** A fast shutdown: the server ends every session, as on a restart or a crash of the host's service. */
  stop(): Promise<unknown> {
    return this.asPostgres('pg_ctl', ['-D', join(this.dir, 'data'), '-m', 'fast', '-w', '-t', '120', 'stop']);
  }

  /** Stops the postmaster and every backend (SIGSTOP): a hung server whose connections stay open. */
  async freeze(): Promise<void> {
    const processes = await this.processes();
    for (const pid of processes) process.kill(pid, 'SIGSTOP');
    this.frozen = processes;
  }

  async thaw(): Promise<void> {
    for (const pid of this.frozen) process.kill(pid, 'SIGCONT');
    this.frozen = [];
  }

  /** The postmaster first (so it forks no more), then its children. */
  private async processes(): Promise<number[]> {
    const postmaster = Number(readFileSync(join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const { stdout } = await run('ps', ['-o', 'pid=', '--ppid', String(postmaster)]);
    return [postmaster, ...stdout.split('\n').map((line) => Number(line.trim())).filter((pid) => pid > 0)];
  }

  async sql(database: string, text: string, values: unknown[]): Promise<void> {
    const client = new Client({ host: '127.0.0.1', port: this.port, user: 'postgres', database });
    await client.connect();
    try {
      await client.query(text, values);
    } finally {
      await client.end();
    }
  }

  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private asPostgres(tool: string, args: string[]) {
    const path = join(this.bin, tool);
    const [command, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
    return run(command as string, argv as string[], { cwd: this.dir, timeout: 180_000 });
  }
}

