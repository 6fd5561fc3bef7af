import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DataSource } from 'typeorm';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { ApiKeyAuthenticator } from '@ws/auth';
import { newId, randomSecret, sha256 } from '@ws/common';
import { TestApi, TestKey, waitFor } from './harness';

/**
 * Failed authentication limits as a client meets them, over real sockets: every request leaves from a loopback
 * address of its own choosing (127.0.0.0/8 is all local), so "another address" is a real other address.
 */
interface Reply {
  status: number;
  retryAfter: string | undefined;
  body: Record<string, unknown>;
}

function post(base: string, path: string, body: unknown, options: { from: string; forwardedFor?: string }): Promise<Reply> {
  const url = new URL(path, base);
  const payload = JSON.stringify(body);
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
  if (options.forwardedFor) headers['x-forwarded-for'] = options.forwardedFor;
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, localAddress: options.from, agent: false, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${path} did not answer`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** A websocket upgrade to a stream with a forged session cookie; answers the refusal's status and Retry-After. */
function openStream(base: string, workspaceId: string, from: string): Promise<Omit<Reply, 'body'>> {
  const url = new URL(`/api/stream/${workspaceId}/vnc`, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname, port: url.port, path: url.pathname, localAddress: from, agent: false, timeout: 30_000,
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomSecret(16), cookie: `ws_stream=forged.${randomSecret(8)}.jwt` },
    });
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined });
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('a forged session opened a stream'));
    });
    req.on('timeout', () => req.destroy(new Error('the stream upgrade did not answer')));
    req.on('error', reject);
    req.end();
  });
}

const PER_ADDRESS = 5;
const PER_KEY = 8;
const BLOCK_SECONDS = 120;
const LIMITS = { AUTH_FAILURES_PER_ADDRESS: PER_ADDRESS, AUTH_FAILURES_PER_KEY: PER_KEY, AUTH_BLOCK_SECONDS: BLOCK_SECONDS, AUTH_FAILURE_WINDOW_SECONDS: 600 };

function expectRateLimited(reply: Reply): void {
  expect(reply.status).toBe(429);
  expect(reply.body).toEqual({ error_message: 'Too many failed authentication attempts; retry later' });
  const seconds = Number(reply.retryAfter);
  expect(Number.isInteger(seconds)).toBe(true);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(seconds).toBeLessThanOrEqual(BLOCK_SECONDS);
}

const wrong = (key: TestKey): TestKey => ({ ...key, api_key_secret: randomSecret(32) });

describe('failed authentication limits (no trusted proxy)', () => {
  let api: TestApi;
  let base: string;
  let replica: NestFastifyApplication;
  let replicaBase: string;

  beforeAll(async () => {
    // An unknown key is remembered far longer than any test here: only the insert notice can make it work.
    api = await TestApi.start({ ...LIMITS, AUTH_UNKNOWN_KEY_CACHE_SECONDS: 3600 });
    base = await api.listen();
    replica = await api.replica();
    await replica.listen(0, '127.0.0.1');
    replicaBase = `http://127.0.0.1:${(replica.getHttpServer().address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await replica?.close();
    await api?.close();
  });

  it('refuses an address with 429 and Retry-After after a flood of wrong secrets; another address keeps working', async () => {
    const key = await api.key(['Users View']);
    const from = '127.0.10.1';
    for (let i = 0; i < PER_ADDRESS; i++) {
      const reply = await post(base, '/api/public/get_users', wrong(key), { from });
      expect(reply.status).toBe(401);
      expect(reply.retryAfter).toBeUndefined();
    }
    expectRateLimited(await post(base, '/api/public/get_users', wrong(key), { from }));
    // The blocked address is refused even with the right secret, and cannot claim another address.
    expectRateLimited(await post(base, '/api/public/get_users', key, { from }));
    expectRateLimited(await post(base, '/api/public/get_users', key, { from, forwardedFor: '198.51.100.23' }));
    // The integrator, from its own address, is not bothered.
    const fine = await post(base, '/api/public/get_users', key, { from: '127.0.10.2' });
    expect(fine.status).toBe(200);
    expect(fine.body).toHaveProperty('users');
  });

  it('refuses a key with 429 after failures against it from many addresses, other keys unaffected', async () => {
    const key = await api.key(['Users View']);
    const other = await api.key(['Users View']);
    for (let i = 1; i <= PER_KEY; i++) expect((await post(base, '/api/public/get_users', wrong(key), { from: `127.0.11.${i}` })).status).toBe(401);
    expectRateLimited(await post(base, '/api/public/get_users', wrong(key), { from: '127.0.11.100' }));
    expectRateLimited(await post(base, '/api/public/get_users', key, { from: '127.0.11.101' }));
    expect((await post(base, '/api/public/get_users', other, { from: '127.0.11.101' })).status).toBe(200);
  });

  it('two api processes on one Redis prefix share the count', async () => {
    const key = await api.key(['Users View']);
    const from = '127.0.12.1';
    for (let i = 0; i < PER_ADDRESS; i++) {
      expect((await post(i % 2 ? replicaBase : base, '/api/public/get_users', wrong(key), { from })).status).toBe(401);
    }
    expectRateLimited(await post(replicaBase, '/api/public/get_users', wrong(key), { from }));
    // The first api never refused this address itself; an unknown key would cost it a query, so it asks Redis first.
    expectRateLimited(await post(base, '/api/public/get_users', { api_key: randomSecret(16), api_key_secret: 'x' }, { from }));
    expect((await post(base, '/api/public/get_users', key, { from: '127.0.12.2' })).status).toBe(200);
  });

  it('forged login tokens and session JWTs get 429 after the limit', async () => {
    const from = '127.0.13.1';
    for (let i = 0; i < PER_ADDRESS; i++) {
      expect((await post(base, '/api/client/login', { login_token: randomSecret(16) }, { from })).status).toBe(401);
    }
    expectRateLimited(await post(base, '/api/client/login', { login_token: randomSecret(16) }, { from }));
    // The same address is refused on the other browser routes too; the count is per address, not per route.
    expectRateLimited(await post(base, '/api/client/session', { session_jwt: 'forged.jwt.token' }, { from }));
    expectRateLimited(await post(base, '/api/client/cast', { key: 'any-link', session_jwt: 'forged.jwt.token' }, { from }));
    const elsewhere = '127.0.13.2';
    for (let i = 0; i < PER_ADDRESS; i++) {
      expect((await post(replicaBase, '/api/client/session', { session_jwt: `forged.${i}.jwt` }, { from: elsewhere })).status).toBe(401);
    }
    expectRateLimited(await post(base, '/api/client/connect', { session_jwt: 'forged.jwt', workspace_id: newId() }, { from: elsewhere }));
    // Bad input is not a failed authentication: validation errors are not counted.
    for (let i = 0; i < PER_ADDRESS + 2; i++) {
      expect((await post(base, '/api/client/login', { login_token: 'short' }, { from: '127.0.13.3' })).status).toBe(400);
    }
  });

  it('forged session cookies at stream admission get 429 after the limit', async () => {
    const from = '127.0.16.1';
    const workspaceId = newId();
    for (let i = 0; i < PER_ADDRESS; i++) expect((await openStream(base, workspaceId, from)).status).toBe(401);
    const refused = await openStream(replicaBase, workspaceId, from);
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    // Counted with the browser routes: the same address is refused there too.
    expectRateLimited(await post(base, '/api/client/session', { session_jwt: 'forged.jwt.token' }, { from }));
  });

  it('repeated unknown keys cost no database query', async () => {
    const apiKey = randomSecret(16);
    const queries = jest.spyOn(PostgresQueryRunner.prototype, 'query');
    try {
      for (let i = 1; i <= 4; i++) {
        expect((await post(base, '/api/public/get_users', { api_key: apiKey, api_key_secret: 'x' }, { from: `127.0.14.${i}` })).status).toBe(401);
      }
      const keyLookups = queries.mock.calls.filter(([sql]) => typeof sql === 'string' && sql.includes('"api_keys"'));
      expect(keyLookups).toHaveLength(1);
    } finally {
      queries.mockRestore();
    }
  });

  it('a key created after it was refused as unknown works at once, on every replica', async () => {
    const apiKey = randomSecret(16);
    const secret = randomSecret(32);
    for (const at of [base, replicaBase]) {
      expect((await post(at, '/api/public/get_users', { api_key: apiKey, api_key_secret: secret }, { from: '127.0.15.1' })).status).toBe(401);
    }
    expect(api.app.get(ApiKeyAuthenticator).isCached(apiKey)).toBe(true);
    // Inserted by hand, as another process (the CLI) would: only the insert notice can tell the apis.
    await api.app.get(DataSource).query(
      `INSERT INTO api_keys (id, api_key, name, secret_sha256, permissions) VALUES ($1, $2, 'late', $3, $4)`,
      [newId(), apiKey, sha256(secret), ['Users View']],
    );
    for (const app of [api.app, replica]) {
      await waitFor('the insert notice', async () => (app.get(ApiKeyAuthenticator).isCached(apiKey) ? undefined : true), 30_000, 20);
    }
    for (const at of [base, replicaBase]) {
      expect((await post(at, '/api/public/get_users', { api_key: apiKey, api_key_secret: secret }, { from: '127.0.15.2' })).status).toBe(200);
    }
  });
});

describe('failed authentication limits behind a trusted proxy', () => {
  let api: TestApi;
  let base: string;

  beforeAll(async () => {
    api = await TestApi.start({ ...LIMITS, TRUSTED_PROXIES: '127.0.0.1' });
    base = await api.listen();
  });
  afterAll(async () => api?.close());

  it('counts per forwarded client address when the request comes from the proxy', async () => {
    const key = await api.key(['Users View']);
    const proxy = '127.0.0.1';
    for (let i = 0; i < PER_ADDRESS; i++) {
      expect((await post(base, '/api/public/get_users', wrong(key), { from: proxy, forwardedFor: '198.51.100.7' })).status).toBe(401);
    }
    expectRateLimited(await post(base, '/api/public/get_users', wrong(key), { from: proxy, forwardedFor: '198.51.100.7' }));
    expectRateLimited(await post(base, '/api/public/get_users', key, { from: proxy, forwardedFor: '198.51.100.7' }));
    // Another client behind the same proxy is not blocked.
    expect((await post(base, '/api/public/get_users', key, { from: proxy, forwardedFor: '198.51.100.8' })).status).toBe(200);
  });

  it('ignores X-Forwarded-For from an address that is not a trusted proxy', async () => {
    const key = await api.key(['Users View']);
    const from = '127.0.20.1';
    for (let i = 0; i < PER_ADDRESS; i++) {
      expect((await post(base, '/api/public/get_users', wrong(key), { from, forwardedFor: `203.0.113.${i}` })).status).toBe(401);
    }
    expectRateLimited(await post(base, '/api/public/get_users', wrong(key), { from, forwardedFor: '203.0.113.100' }));
    expectRateLimited(await post(base, '/api/public/get_users', key, { from, forwardedFor: '203.0.113.200' }));
  });
});

describe('failed authentication limits while Redis cannot be reached', () => {
  let api: TestApi;
  let base: string;

  beforeAll(async () => {
    // A loopback port nothing listens on: every Redis command fails at once.
    const closedPort = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    api = await TestApi.start({ ...LIMITS, REDIS_URL: `redis://127.0.0.1:${closedPort}`, DEPENDENCY_TIMEOUT_MS: 1000 });
    base = await api.listen();
  });
  afterAll(async () => api?.close());

  it('still limits failures (counted in memory) and never fails a valid request', async () => {
    const key = await api.key(['Users View']);
    expect((await post(base, '/api/public/get_users', key, { from: '127.0.30.1' })).status).toBe(200);
    const from = '127.0.30.2';
    for (let i = 0; i < PER_ADDRESS; i++) expect((await post(base, '/api/public/get_users', wrong(key), { from })).status).toBe(401);
    expectRateLimited(await post(base, '/api/public/get_users', wrong(key), { from }));
    for (let i = 0; i < PER_ADDRESS; i++) {
      expect((await post(base, '/api/client/login', { login_token: randomSecret(16) }, { from: '127.0.30.3' })).status).toBe(401);
    }
    expectRateLimited(await post(base, '/api/client/login', { login_token: randomSecret(16) }, { from: '127.0.30.3' }));
    expect((await post(base, '/api/public/get_users', key, { from: '127.0.30.4' })).status).toBe(200);
  });
});
