import { request as httpRequest } from 'node:http';
import { JobProducer, QUEUES } from '@ws/queue';
import { QUEUE_DASHBOARD_PATH, queueDashboardRoutes } from '../../apps/api/src/admin/queue-dashboard';
import { createApi } from '../../apps/api/src/bootstrap';
import { ensureChromium, launchChromium } from './browser';
import { prerequisite, TestApi, TestKey, waitFor } from './harness';
import { PrivateRedis, REDIS_SERVER } from './private-redis';

/**
 * The operator's queue dashboard (issue 23, point 6) over real sockets: each request leaves from a loopback
 * address of its own (127.0.0.0/8 is all local), so the failed-authentication limit per address is real here
 * and one test's refusals never count against another's.
 */
interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

let nextAddress = 10;
const freshAddress = () => `127.0.${Math.floor(nextAddress / 250)}.${(nextAddress++ % 250) + 2}`;

function send(base: string, method: string, path: string, options: { key?: TestKey; basic?: string; from?: string; origin?: string } = {}): Promise<Reply> {
  const url = new URL(path, base);
  const headers: Record<string, string> = {};
  if (options.key) headers.authorization = `Basic ${Buffer.from(`${options.key.api_key}:${options.key.api_key_secret}`).toString('base64')}`;
  if (options.basic !== undefined) headers.authorization = options.basic;
  if (options.origin) headers.origin = options.origin;
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, localAddress: options.from ?? freshAddress(), agent: false, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} did not answer`)));
    req.on('error', reject);
    req.end();
  });
}

const json = (reply: Reply) => JSON.parse(reply.text) as Record<string, unknown>;
const FAILURES_PER_ADDRESS = 4;

describe('queue dashboard at /admin/queues', () => {
  let api: TestApi;
  let base: string;
  let admin: TestKey;
  let queuesAdmin: TestKey;
  let systemViewer: TestKey;
  let readOnlyQueuesAdmin: TestKey;

  beforeAll(async () => {
    // Before the worker starts: installing chromium (when missing) blocks this process.
    ensureChromium();
    // Real limits per address (each test sends from addresses of its own); the worker runs the jobs the dashboard retries.
    api = await TestApi.start({ AUTH_FAILURES_PER_ADDRESS: FAILURES_PER_ADDRESS, AUTH_FAILURES_PER_KEY: 1_000_000, AUTH_BLOCK_SECONDS: 600 }, { worker: true });
    base = await api.listen();
    admin = await api.key(['Global Admin']);
    queuesAdmin = await api.key(['Queues Admin']);
    systemViewer = await api.key(['System View']);
    readOnlyQueuesAdmin = await api.key(['Queues Admin'], { readOnly: true });
  });
  afterAll(async () => api?.close());

  describe('refusals, in the api\'s JSON shape', () => {
    it('no credentials: 401 asking for Basic', async () => {
      const res = await send(base, 'GET', QUEUE_DASHBOARD_PATH);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm=/);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(json(res)).toEqual({ error_message: 'Missing api_key and api_key_secret' });
    });

    it('a wrong secret: 401', async () => {
      const res = await send(base, 'GET', QUEUE_DASHBOARD_PATH, { key: { api_key: queuesAdmin.api_key, api_key_secret: 'not-the-secret' } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Basic /);
      expect(json(res)).toEqual({ error_message: 'Invalid api_key or api_key_secret' });
    });

    it('a Basic header that is not user:password: 401', async () => {
      const res = await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/api/queues`, { basic: `Basic ${Buffer.from('no-colon').toString('base64')}` });
      expect(res.status).toBe(401);
      expect(json(res)).toEqual({ error_message: 'Missing api_key and api_key_secret' });
    });

    it('a key without Queues Admin: 403 naming it, on the page and on the api', async () => {
      for (const path of [QUEUE_DASHBOARD_PATH, `${QUEUE_DASHBOARD_PATH}/api/queues`]) {
        const res = await send(base, 'GET', path, { key: systemViewer });
        expect(res.status).toBe(403);
        expect(json(res)).toEqual({ error_message: 'Missing permissions (the queue dashboard): Queues Admin' });
      }
    });

    it('a Read Only key, even with Queues Admin: 403 (retry and remove write)', async () => {
      const res = await send(base, 'GET', QUEUE_DASHBOARD_PATH, { key: readOnlyQueuesAdmin });
      expect(res.status).toBe(403);
      expect(json(res)).toEqual({ error_message: 'The API key is Read Only and the queue dashboard writes' });
    });

    it('failed attempts count against the address like any operation: 429 with Retry-After, then even the right secret', async () => {
      const from = freshAddress();
      const wrong = { api_key: queuesAdmin.api_key, api_key_secret: 'wrong' };
      const statuses: number[] = [];
      for (let i = 0; i < FAILURES_PER_ADDRESS + 1; i++) statuses.push((await send(base, 'GET', QUEUE_DASHBOARD_PATH, { key: wrong, from })).status);
      expect(statuses.slice(0, FAILURES_PER_ADDRESS)).toEqual(Array(FAILURES_PER_ADDRESS).fill(401));
      expect(statuses[FAILURES_PER_ADDRESS]).toBe(429);
      const blocked = await send(base, 'GET', QUEUE_DASHBOARD_PATH, { key: queuesAdmin, from });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      expect(json(blocked)).toEqual({ error_message: 'Too many failed authentication attempts; retry later' });
      // Another address is not blocked.
      expect((await send(base, 'GET', QUEUE_DASHBOARD_PATH, { key: queuesAdmin })).status).toBe(200);
    });
  });

  describe('exempt from the global operation guard, explicitly: every route of the dashboard checks the operator itself', () => {
    it('the page, its static files and its api are all registered by the dashboard', () => {
      const routes = queueDashboardRoutes(api.app.getHttpAdapter().getInstance());
      expect(routes).toContain(`GET ${QUEUE_DASHBOARD_PATH}`);
      expect(routes.some((r) => r.startsWith(`GET ${QUEUE_DASHBOARD_PATH}/static/`))).toBe(true);
      expect(routes).toContain(`PUT ${QUEUE_DASHBOARD_PATH}/api/queues/:queueName/:jobId/retry`);
      expect(routes).toContain(`PUT ${QUEUE_DASHBOARD_PATH}/api/queues/:queueName/:jobId/clean`);
    });

    it('every one of them answers 401 to a request without credentials', async () => {
      const routes = queueDashboardRoutes(api.app.getHttpAdapter().getInstance());
      const open: string[] = [];
      for (const route of routes) {
        const [method, url] = route.split(' ');
        const path = url.replace(/:[A-Za-z]+/g, 'x').replace(/\*/g, 'js/x.js');
        const res = await send(base, method, path);
        if (res.status !== 401) open.push(`${route} → ${res.status}`);
      }
      expect(open).toEqual([]);
    });

    it('a cross-site request that changes something is refused even with good credentials', async () => {
      const res = await send(base, 'PUT', `${QUEUE_DASHBOARD_PATH}/api/queues/${QUEUES.recordings}/retry/failed`, { key: admin, origin: 'https://elsewhere.example' });
      expect(res.status).toBe(403);
      expect(json(res)).toEqual({ error_message: 'Cross-site requests are refused: this page is not part of this service' });
    });
  });

  describe('an operator sees every queue', () => {
    it.each([['a Global Admin key', () => admin], ['a key holding only Queues Admin', () => queuesAdmin]])('%s: the page, with its files from the package and nothing from elsewhere', async (_name, key) => {
      const page = await send(base, 'GET', QUEUE_DASHBOARD_PATH, { key: key() });
      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.text).toContain(`<base href="${QUEUE_DASHBOARD_PATH}/"`);
      expect(page.headers['content-security-policy']).toContain("default-src 'none'");
      // Every policy source is this origin, and the page names no other site (the package's font link is dropped).
      expect(page.headers['content-security-policy']).not.toMatch(/https?:|\*/);
      expect(page.text).not.toMatch(/(?:src|href)\s*=\s*["']?(?:https?:)?\/\//i);
      const scripts = [...page.text.matchAll(/src="(static\/[^"]+)"/g)].map((m) => m[1]);
      const styles = [...page.text.matchAll(/href="(static\/[^"]+\.css)"/g)].map((m) => m[1]);
      expect(scripts.length).toBeGreaterThan(0);
      for (const file of [...scripts, ...styles]) {
        const res = await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/${file}`, { key: key() });
        expect([file, res.status]).toEqual([file, 200]);
      }
    });

    it.each([['a Global Admin key', () => admin], ['a key holding only Queues Admin', () => queuesAdmin]])('%s: the api lists every queue of the deployment', async (_name, key) => {
      const res = await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/api/queues`, { key: key() });
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const names = (json(res).queues as Array<{ name: string }>).map((q) => q.name).sort();
      expect(names).toEqual(Object.values(QUEUES).sort());
    });
  });

  describe('retry and remove through the dashboard\'s api', () => {
    /** A job that fails for good: a recording id that is no id (PostgreSQL refuses it), one attempt. */
    async function failedJob(id: string) {
      await api.app.get(JobProducer).enqueue('recording.convert', { recordingId: `not-a-uuid-${id}` }, { jobId: id, attempts: 1 });
      const queue = api.app.get(JobProducer).queue(QUEUES.recordings);
      // State first, then the job: a job read before its state is final may still show the running attempt.
      return waitFor(`job ${id} to fail`, async () => ((await queue.getJobState(id)) === 'failed' ? queue.getJob(id) : undefined));
    }

    async function listedFailed(key: TestKey): Promise<string[]> {
      const res = await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/api/queues?activeQueue=${QUEUES.recordings}&status=failed&page=1&jobsPerPage=50`, { key });
      expect(res.status).toBe(200);
      const recordings = (json(res).queues as Array<{ name: string; jobs: Array<{ id: string; failedReason?: string }> }>).find((q) => q.name === QUEUES.recordings);
      return (recordings?.jobs ?? []).map((j) => j.id);
    }

    it('a failed job is listed, retried (the worker runs it again) and removed', async () => {
      const id = 'dashboard-retry-1';
      const failed = await failedJob(id);
      expect(failed.attemptsMade).toBe(1);
      expect(failed.failedReason).toMatch(/uuid/i);
      expect(await listedFailed(queuesAdmin)).toContain(id);

      const retried = await send(base, 'PUT', `${QUEUE_DASHBOARD_PATH}/api/queues/${QUEUES.recordings}/${id}/retry`, { key: queuesAdmin });
      expect(retried.status).toBe(204);
      const queue = api.app.get(JobProducer).queue(QUEUES.recordings);
      // The retry put it back to wait; the worker ran it once more (and it failed again, being what it is).
      const rerun = await waitFor('the retried job to run again', async () => {
        if ((await queue.getJobState(id)) !== 'failed') return undefined;
        const job = await queue.getJob(id);
        return job && job.attemptsMade >= 2 ? job : undefined;
      });
      expect(rerun.attemptsMade).toBe(2);

      const removed = await send(base, 'PUT', `${QUEUE_DASHBOARD_PATH}/api/queues/${QUEUES.recordings}/${id}/clean`, { key: queuesAdmin });
      expect(removed.status).toBe(204);
      expect(await queue.getJob(id)).toBeUndefined();
      expect(await listedFailed(queuesAdmin)).not.toContain(id);
    });

    it('a key without Queues Admin can neither retry nor remove', async () => {
      const id = 'dashboard-refused-1';
      await failedJob(id);
      for (const action of ['retry', 'clean']) {
        const res = await send(base, 'PUT', `${QUEUE_DASHBOARD_PATH}/api/queues/${QUEUES.recordings}/${id}/${action}`, { key: systemViewer });
        expect(res.status).toBe(403);
      }
      const job = await api.app.get(JobProducer).queue(QUEUES.recordings).getJob(id);
      expect(job && (await job.getState())).toBe('failed');
      expect(job?.attemptsMade).toBe(1);
    });
  });

  it('in a browser: the operator logs in with Basic, the board shows every queue and loads nothing from elsewhere', async () => {
    const browser = await launchChromium();
    try {
      const context = await browser.newContext({ httpCredentials: { username: queuesAdmin.api_key, password: queuesAdmin.api_key_secret } });
      const page = await context.newPage();
      const elsewhere: string[] = [];
      const failed: string[] = [];
      page.on('request', (r) => {
        if (new URL(r.url()).origin !== base && !r.url().startsWith('data:')) elsewhere.push(r.url());
      });
      page.on('response', (r) => {
        if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
      });
      const scriptErrors: string[] = [];
      page.on('pageerror', (e) => scriptErrors.push(e.message));
      const res = await page.goto(`${base}${QUEUE_DASHBOARD_PATH}`, { timeout: 60_000 });
      expect(res?.status()).toBe(200);
      for (const name of Object.values(QUEUES)) {
        await page.getByText(name, { exact: true }).first().waitFor({ timeout: 60_000 });
      }
      expect(scriptErrors).toEqual([]);
      expect(failed).toEqual([]);
      // The package's page links a font stylesheet of another site: that link is dropped (and the policy would refuse it).
      expect(elsewhere).toEqual([]);
    } finally {
      await browser.close();
    }
  });

  it('QUEUE_DASHBOARD=false: nothing is served there (the api\'s 404)', async () => {
    const app = await createApi({ ...api.settings, QUEUE_DASHBOARD: false });
    try {
      await app.init();
      await app.getHttpAdapter().getInstance().ready();
      expect(queueDashboardRoutes(app.getHttpAdapter().getInstance())).toEqual([]);
      const res = await app.getHttpAdapter().getInstance().inject({ method: 'GET', url: `${QUEUE_DASHBOARD_PATH}/api/queues`, headers: { authorization: `Basic ${Buffer.from(`${admin.api_key}:${admin.api_key_secret}`).toString('base64')}` } });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error_message: 'Unknown operation' });
    } finally {
      await app.close();
    }
  });
});

(prerequisite(Boolean(REDIS_SERVER), 'redis-server', 'scripts/ensure-services.sh installs Debian\'s redis-server') ? describe : describe.skip)('queue dashboard while Redis is down', () => {
  let redis: PrivateRedis;
  let api: TestApi;
  let base: string;
  let operator: TestKey;

  beforeAll(async () => {
    redis = await PrivateRedis.start();
    api = await TestApi.start({ REDIS_URL: redis.url, DEPENDENCY_TIMEOUT_MS: 1000 });
    base = await api.listen();
    operator = await api.key(['Queues Admin']);
  });
  afterAll(async () => {
    try {
      await api?.close();
    } finally {
      await redis?.stop();
    }
  });

  it('answers 503 with Retry-After (the api\'s outage answer), and serves again once Redis is back', async () => {
    expect((await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/api/queues`, { key: operator })).status).toBe(200);
    await redis.stop();
    const down = await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/api/queues`, { key: operator });
    expect(down.status).toBe(503);
    expect(Number(down.headers['retry-after'])).toBeGreaterThan(0);
    expect(json(down)).toEqual({ error_message: 'Redis is unavailable; retry later' });
    await redis.restart();
    const back = await waitFor('the dashboard to serve again', async () => {
      const res = await send(base, 'GET', `${QUEUE_DASHBOARD_PATH}/api/queues`, { key: operator });
      return res.status === 200 ? res : undefined;
    }, 30_000, 200);
    expect((json(back).queues as Array<{ name: string }>).map((q) => q.name).sort()).toEqual(Object.values(QUEUES).sort());
  });
});
