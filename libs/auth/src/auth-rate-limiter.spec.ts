import { createServer } from 'node:net';
import Redis from 'ioredis';
import { ApiError, AppConfig, ErrorCode, loadConfig, randomSecret } from '@ws/common';
import { RedisConnections } from '@ws/queue';
import { AuthRateLimiter, FailureLimiter } from './auth-rate-limiter';
import { TrustedProxies } from './trusted-proxies';

// Real Redis on loopback; every limiter gets a prefix of its own.
const clients: Redis[] = [];
function redis(url = 'redis://127.0.0.1:6379'): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2000, commandTimeout: 2000, retryStrategy: () => 200 });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}
afterAll(() => Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect()))));

async function ready(client: Redis): Promise<Redis> {
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  return client;
}

const limits = { perAddress: 3, perKey: 4, windowSeconds: 60, blockSeconds: 30 };
const prefix = () => `limiter-spec-${randomSecret(4)}`;

describe('FailureLimiter', () => {
  it('lets the limit of failures from an address through, then blocks it for the block duration', async () => {
    const limiter = new FailureLimiter(await ready(redis()), prefix(), limits);
    const attempt = { address: '10.0.0.1' };
    for (let i = 0; i < limits.perAddress; i++) expect(await limiter.recordFailure(attempt)).toBe(0);
    expect(limiter.blockedLocallyMs(attempt)).toBe(0);
    const blocked = await limiter.recordFailure(attempt);
    expect(blocked).toBeGreaterThan(0);
    expect(blocked).toBeLessThanOrEqual(limits.blockSeconds * 1000);
    expect(limiter.blockedLocallyMs(attempt)).toBeGreaterThan(0);
    expect(await limiter.blockedMs(attempt)).toBeGreaterThan(0);
    // Another address is not affected.
    expect(await limiter.blockedMs({ address: '10.0.0.2' })).toBe(0);
    expect(await limiter.recordFailure({ address: '10.0.0.2' })).toBe(0);
  });

  it('shares the count between limiters on the same prefix (api replicas), and learns of a block from Redis', async () => {
    const shared = prefix();
    const [first, second] = [new FailureLimiter(await ready(redis()), shared, limits), new FailureLimiter(await ready(redis()), shared, limits)];
    const attempt = { address: '10.0.1.1' };
    expect(await first.recordFailure(attempt)).toBe(0);
    expect(await second.recordFailure(attempt)).toBe(0);
    expect(await first.recordFailure(attempt)).toBe(0);
    expect(await second.recordFailure(attempt)).toBeGreaterThan(0);
    // The first never saw the block itself: its memory does not know, Redis does.
    expect(first.blockedLocallyMs(attempt)).toBe(0);
    expect(await first.blockedMs(attempt)).toBeGreaterThan(0);
    expect(first.blockedLocallyMs(attempt)).toBeGreaterThan(0);
    // A limiter on another prefix (another deployment) counts apart.
    expect(await new FailureLimiter(await ready(redis()), prefix(), limits).blockedMs(attempt)).toBe(0);
  });

  it('blocks a key that fails from many addresses, without blocking those addresses for other keys', async () => {
    const limiter = new FailureLimiter(await ready(redis()), prefix(), limits);
    const apiKey = randomSecret(16);
    for (let i = 0; i < limits.perKey; i++) expect(await limiter.recordFailure({ address: `10.0.2.${i}`, apiKey })).toBe(0);
    expect(await limiter.recordFailure({ address: '10.0.2.200', apiKey })).toBeGreaterThan(0);
    expect(limiter.blockedLocallyMs({ address: '10.0.2.201', apiKey })).toBeGreaterThan(0);
    expect(await limiter.blockedMs({ address: '10.0.2.0', apiKey: randomSecret(16) })).toBe(0);
  });

  it('never counts an overlong api_key against a key (it names no key)', async () => {
    const limiter = new FailureLimiter(await ready(redis()), prefix(), { ...limits, perAddress: 100, perKey: 1 });
    const apiKey = 'k'.repeat(129);
    for (let i = 0; i < 3; i++) expect(await limiter.recordFailure({ address: `10.0.3.${i}`, apiKey })).toBe(0);
    expect(await limiter.blockedMs({ address: '10.0.3.9', apiKey })).toBe(0);
  });

  it('counts in memory while Redis cannot be reached: the limit still holds and nothing throws', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const limiter = new FailureLimiter(redis(`redis://127.0.0.1:${closedPort}`), prefix(), limits);
    const attempt = { address: '10.0.4.1', apiKey: randomSecret(16) };
    expect(await limiter.blockedMs(attempt)).toBe(0);
    for (let i = 0; i < limits.perAddress; i++) expect(await limiter.recordFailure(attempt)).toBe(0);
    expect(await limiter.recordFailure(attempt)).toBeGreaterThan(0);
    expect(await limiter.blockedMs(attempt)).toBeGreaterThan(0);
  });
});

describe('TrustedProxies', () => {
  it('uses the socket address when no proxy is trusted, whatever X-Forwarded-For says', () => {
    expect(new TrustedProxies([]).clientAddress('127.0.0.1', '203.0.113.9')).toBe('127.0.0.1');
  });

  it('walks X-Forwarded-For from the right while the hop is a trusted proxy', () => {
    const proxies = new TrustedProxies(['127.0.0.1', '10.0.0.0/8']);
    expect(proxies.clientAddress('127.0.0.1', '203.0.113.9')).toBe('203.0.113.9');
    expect(proxies.clientAddress('127.0.0.1', '198.51.100.7, 203.0.113.9, 10.1.2.3')).toBe('203.0.113.9');
    expect(proxies.clientAddress('::ffff:127.0.0.1', ['198.51.100.7', '10.1.2.3'])).toBe('198.51.100.7');
    // A client that is not a proxy cannot choose its address.
    expect(proxies.clientAddress('192.0.2.1', '203.0.113.9')).toBe('192.0.2.1');
    // A garbage hop ends the walk at the last proxy.
    expect(proxies.clientAddress('127.0.0.1', 'not-an-address')).toBe('127.0.0.1');
    expect(proxies.clientAddress('127.0.0.1', undefined)).toBe('127.0.0.1');
  });

  it('understands IPv6 proxies and subnets', () => {
    const proxies = new TrustedProxies(['::1', 'fd00::/8']);
    expect(proxies.clientAddress('::1', '2001:db8::5, fd12::1')).toBe('2001:db8::5');
  });
});

describe('AuthRateLimiter', () => {
  let connections: RedisConnections;
  let limiter: AuthRateLimiter;
  beforeAll(async () => {
    const config: AppConfig = Object.assign(loadConfig(), { REDIS_PREFIX: prefix(), AUTH_FAILURES_PER_ADDRESS: 2, AUTH_BLOCK_SECONDS: 7 });
    connections = new RedisConnections(config);
    await connections.onModuleInit();
    limiter = new AuthRateLimiter(connections, config);
  });
  afterAll(() => connections.onApplicationShutdown());

  it('turns the 401 past the limit into 429 with Retry-After, and leaves other errors alone', async () => {
    const attempt = { address: '10.0.5.1' };
    const unauthenticated = new ApiError(ErrorCode.Unauthenticated, 'Invalid api_key or api_key_secret');
    const forbidden = new ApiError(ErrorCode.Forbidden, 'no');
    expect(await limiter.failed(forbidden, attempt)).toBe(forbidden);
    expect(await limiter.failed(unauthenticated, attempt)).toBe(unauthenticated);
    expect(await limiter.failed(unauthenticated, attempt)).toBe(unauthenticated);
    const limited = (await limiter.failed(unauthenticated, attempt)) as ApiError;
    expect(limited.code).toBe(ErrorCode.RateLimited);
    expect(limited.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(7);
    expect(() => limiter.assertNotBlockedHere(attempt)).toThrow('Too many failed authentication attempts');
    await expect(limiter.assertNotBlocked({ address: '10.0.5.2' })).resolves.toBeUndefined();
  });
});
