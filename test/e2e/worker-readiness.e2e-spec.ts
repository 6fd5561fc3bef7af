/**
 * The worker's health endpoints on its metrics listener (issue 23, point 4): /healthz answers while the process
 * serves; /readyz is 503 naming what is missing — no reachable Docker host yet, Redis stopped — and 200 again once
 * it is back, by itself. Redis is a private redis-server of this test (the shared one serves other suites).
 */
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { freePort, TestApi, waitFor } from './harness';
import { PrivateRedis } from './private-redis';

describe('worker /healthz and /readyz', () => {
  let redis: PrivateRedis;
  let api: TestApi;
  let base: string;

  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`);
    return { status: res.status, body: (await res.json()) as Record<string, string> };
  };

  beforeAll(async () => {
    redis = await PrivateRedis.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    api = await TestApi.start({ REDIS_URL: redis.url, DEPENDENCY_TIMEOUT_MS: 1000 });
    await api.startWorker({ METRICS_HOST: '127.0.0.1', METRICS_PORT: port });
  });
  afterAll(async () => {
    if (redis && !redis.running) await redis.restart();
    await api?.close();
    await redis?.stop();
  });

  it('is alive at once, and ready only once an enabled Docker host is registered', async () => {
    expect(await get('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
    const none = await get('/readyz');
    expect(none.status).toBe(503);
    expect(none.body.error_message).toMatch(/^Not ready: Docker: no enabled Docker host/);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 8 * 1024 ** 3 });
    expect(await get('/readyz')).toEqual({ status: 200, body: { status: 'ok' } });
  });

  it('turns unready while Redis is stopped, still alive, and ready again when Redis returns', async () => {
    await redis.stop();
    const down = await waitFor('/readyz refusing', async () => {
      const res = await get('/readyz');
      return res.status === 503 ? res : undefined;
    }, 30_000, 200);
    expect(down.body.error_message).toMatch(/Redis: /);
    expect(down.body.error_message).not.toMatch(/PostgreSQL|Docker/);
    expect((await get('/healthz')).status).toBe(200);
    await redis.restart();
    await waitFor('/readyz ready again', async () => ((await get('/readyz')).status === 200 ? true : undefined), 60_000, 200);
  });
});
