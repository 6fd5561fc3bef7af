import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { MetricsServer } from '@ws/metrics';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { openStream } from './fixtures';
import { desktopImage, freePort, TestApi, TestKey, waitFor } from './harness';

/** One sample of the text exposition: `name{label="value",…} number`. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A small parser of Prometheus's text format (what the tests need: samples, not HELP/TYPE). */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[name] = value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of the samples of `name` whose labels include `labels` (0 when none). */
function figure(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

const has = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

/**
 * The Prometheus listeners of the api and the worker on loopback ports of their own: real operations (a failed
 * authentication, a rate-limit refusal, a launch to running and its removal, a staging pool filled and claimed)
 * move the figures; the public port has no /metrics; METRICS_PORT=0 opens no listener.
 */
describe('Prometheus metrics', () => {
  let api: TestApi;
  let admin: TestKey;
  let key: TestKey;
  let apiMetrics: string;
  let base: string;
  let workerMetrics: string;
  let zoneId: string;
  let imageId: string;
  const users: string[] = [];

  const scrape = async (url: string): Promise<Sample[]> => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };

  beforeAll(async () => {
    const [apiPort, workerPort] = [await freePort(), await freePort()];
    apiMetrics = `http://127.0.0.1:${apiPort}/metrics`;
    workerMetrics = `http://127.0.0.1:${workerPort}/metrics`;
    // A low per-key limit, so a few wrong secrets against one key draw a 429.
    api = await TestApi.start({ METRICS_HOST: '127.0.0.1', METRICS_PORT: apiPort, AUTH_FAILURES_PER_KEY: 3, WORKER_LOCK_MS: 3000, WEBHOOK_ALLOW_PRIVATE_ADDRESSES: true });
    await api.startWorker({ METRICS_PORT: workerPort });
    base = await api.listen();
    const zone = await api.app.get(ZonesService).ensure('default');
    zoneId = toWireId(zone.id);
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 8 * 1024 ** 3 });
    const image = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Desktop', cores: 0.5, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' } });
    imageId = toWireId(image.id);
    admin = await api.key(['Global Admin']);
    key = await api.key(['Users Auth Session', 'User']);
    for (const username of ['metrics-cold', 'metrics-staged']) users.push((await api.call('create_user', admin, { target_user: { username } })).body.user.user_id);
  });
  afterAll(async () => api?.close());

  const running = (workspaceId: string, userId: string) =>
    waitFor(`workspace ${workspaceId} running`, async () => {
      const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
      if (res.body.workspace?.operational_status === 'running') return res;
      if (res.body.workspace?.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(res.body)}`);
      return undefined;
    }, 120_000, 200);
  const removed = (workspaceId: string, userId: string) =>
    waitFor(`workspace ${workspaceId} removed`, async () => {
      const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
      return res.status === 400 ? true : undefined;
    }, 120_000, 200);

  it('shows the process metrics and every queue depth on both listeners, each a listener of its own', async () => {
    const [a, w] = [await scrape(apiMetrics), await scrape(workerMetrics)];
    for (const samples of [a, w]) {
      expect(has(samples, 'workspace_server_process_cpu_user_seconds_total')).toBe(true);
      expect(has(samples, 'workspace_server_nodejs_eventloop_lag_seconds')).toBe(true);
    }
    for (const queue of ['workspaces', 'maintenance', 'recordings']) {
      for (const state of ['waiting', 'active', 'delayed', 'failed']) expect(has(w, 'workspace_server_queue_jobs', { queue, state })).toBe(true);
    }
    // Queue depths are the worker's to read; the api's replicas do not repeat them.
    expect(has(a, 'workspace_server_queue_jobs')).toBe(false);
    expect(figure(w, 'workspace_server_server_cores_offered', { server: 'local' })).toBeGreaterThan(0);
    expect(figure(w, 'workspace_server_server_memory_offered_bytes', { server: 'local' })).toBeGreaterThan(0);

    const other = await fetch(apiMetrics.replace('/metrics', '/other'));
    expect(other.status).toBe(404);
    expect(await other.json()).toEqual({ error_message: expect.any(String) });
  });

  it('counts failed authentications and rate-limit refusals by operation', async () => {
    const before = await scrape(apiMetrics);
    const victim = await api.key(['User']);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await api.call('get_user', { api_key: victim.api_key, api_key_secret: 'wrong' }, { target_user: { user_id: users[0] } })).status);
    expect(statuses).toContain(401);
    expect(statuses).toContain(429);
    const after = await scrape(apiMetrics);
    const moved = (name: string, labels: Record<string, string>) => figure(after, name, labels) - figure(before, name, labels);
    expect(moved('workspace_server_authentication_failures_total', { operation: 'get_user' })).toBe(statuses.filter((s) => s === 401).length);
    expect(moved('workspace_server_rate_limited_requests_total', { operation: 'get_user' })).toBe(statuses.filter((s) => s === 429).length);
    expect(moved('workspace_server_http_requests_total', { operation: 'get_user', status_code: '401' })).toBe(statuses.filter((s) => s === 401).length);
  });

  it('request_workspace → running → a stream → destroy_workspace moves the request, stream, job, provision and fleet figures', async () => {
    const [apiBefore, workerBefore] = [await scrape(apiMetrics), await scrape(workerMetrics)];
    const userId = users[0];
    const requested = await api.call('request_workspace', key, { user_id: userId, image_id: imageId });
    expect(requested.status).toBe(200);
    const workspaceId = requested.body.workspace_id as string;
    const status = await running(workspaceId, userId);

    // A stream: counted open while it is, its bytes both ways once it closes.
    const jwt = (status.body.workspace_url as string).split('/').pop() as string;
    const { rfb } = await openStream(base, workspaceId, jwt);
    await rfb.captureFrame({ timeoutMs: 15_000 });
    expect(figure(await scrape(apiMetrics), 'workspace_server_stream_connections')).toBe(1);
    await rfb.close();
    await waitFor('the stream counted closed', async () => (figure(await scrape(apiMetrics), 'workspace_server_stream_connections') === 0 ? true : undefined), 10_000, 100);

    // Read at scrape from PostgreSQL: the running workspace on its server, and the capacity it holds.
    const whileRunning = await scrape(workerMetrics);
    expect(figure(whileRunning, 'workspace_server_workspaces', { status: 'running', server: 'local' })).toBeGreaterThanOrEqual(1);
    expect(figure(whileRunning, 'workspace_server_server_cores_used', { server: 'local' })).toBeGreaterThanOrEqual(0.5);
    expect(figure(whileRunning, 'workspace_server_server_memory_used_bytes', { server: 'local' })).toBeGreaterThanOrEqual(384 * 1024 ** 2);

    expect((await api.call('destroy_workspace', key, { workspace_id: workspaceId, user_id: userId })).status).toBe(200);
    await removed(workspaceId, userId);

    const [apiAfter, workerAfter] = [await scrape(apiMetrics), await scrape(workerMetrics)];
    const apiMoved = (name: string, labels: Record<string, string> = {}) => figure(apiAfter, name, labels) - figure(apiBefore, name, labels);
    const workerMoved = (name: string, labels: Record<string, string> = {}) => figure(workerAfter, name, labels) - figure(workerBefore, name, labels);
    expect(apiMoved('workspace_server_http_requests_total', { operation: 'request_workspace', status_code: '200' })).toBe(1);
    expect(apiMoved('workspace_server_http_requests_total', { operation: 'destroy_workspace', status_code: '200' })).toBe(1);
    expect(apiMoved('workspace_server_http_request_duration_seconds_count', { operation: 'request_workspace' })).toBe(1);
    expect(apiMoved('workspace_server_http_requests_total', { operation: 'get_workspace_status' })).toBeGreaterThanOrEqual(2);
    expect(apiMoved('workspace_server_stream_bytes_total', { direction: 'to_client' })).toBeGreaterThan(0);
    expect(apiMoved('workspace_server_stream_bytes_total', { direction: 'from_client' })).toBeGreaterThan(0);
    expect(workerMoved('workspace_server_jobs_total', { queue: 'workspaces', job: 'workspace.provision', outcome: 'completed' })).toBeGreaterThanOrEqual(1);
    expect(workerMoved('workspace_server_jobs_total', { queue: 'workspaces', job: 'workspace.destroy', outcome: 'completed' })).toBeGreaterThanOrEqual(1);
    expect(workerMoved('workspace_server_job_duration_seconds_count', { queue: 'workspaces', job: 'workspace.provision' })).toBeGreaterThanOrEqual(1);
    expect(workerMoved('workspace_server_workspace_provision_duration_seconds_count', { kind: 'cold' })).toBe(1);
    expect(figure(workerAfter, 'workspace_server_workspaces', { status: 'running', server: 'local' })).toBe(0);
  });

  it('a staging pool: desired and ready while it fills, a claim counted and timed, its provisions as staged', async () => {
    const workerBefore = await scrape(workerMetrics);
    const apiBefore = await scrape(apiMetrics);
    const created = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: imageId, num_sessions: 1, expiration: 1 } });
    expect(created.status).toBe(200);
    const pool = created.body.staging_config.staging_config_id as string;

    const filled = await waitFor('a ready staged workspace', async () => {
      const samples = await scrape(workerMetrics);
      return figure(samples, 'workspace_server_staged_workspaces_ready', { pool }) === 1 ? samples : undefined;
    }, 180_000, 500);
    expect(figure(filled, 'workspace_server_staged_workspaces_desired', { pool })).toBe(1);
    expect(figure(filled, 'workspace_server_staged_workspaces_created_total') - figure(workerBefore, 'workspace_server_staged_workspaces_created_total')).toBeGreaterThanOrEqual(1);
    expect(figure(filled, 'workspace_server_workspace_provision_duration_seconds_count', { kind: 'staged' }) - figure(workerBefore, 'workspace_server_workspace_provision_duration_seconds_count', { kind: 'staged' })).toBeGreaterThanOrEqual(1);

    const userId = users[1];
    const claimed = await api.call('request_workspace', key, { user_id: userId, image_id: imageId });
    expect(claimed.status).toBe(200);
    expect(claimed.body.status).toBe('running');
    const apiAfter = await scrape(apiMetrics);
    expect(figure(apiAfter, 'workspace_server_staged_workspaces_claimed_total') - figure(apiBefore, 'workspace_server_staged_workspaces_claimed_total')).toBe(1);
    expect(figure(apiAfter, 'workspace_server_staged_workspace_claim_duration_seconds_count') - figure(apiBefore, 'workspace_server_staged_workspace_claim_duration_seconds_count')).toBe(1);

    // The pool is emptied first, so the refill the claim asks for is not left behind.
    expect((await api.call('update_staging_config', admin, { target_staging_config: { staging_config_id: pool, num_sessions: 0 } })).status).toBe(200);
    expect((await api.call('destroy_workspace', key, { workspace_id: claimed.body.workspace_id, user_id: userId })).status).toBe(200);
    await removed(claimed.body.workspace_id as string, userId);
    await waitFor('the pool emptied', async () => {
      const samples = await scrape(workerMetrics);
      return figure(samples, 'workspace_server_staged_workspaces_ready', { pool }) + figure(samples, 'workspace_server_staged_workspaces_starting', { pool }) === 0 ? true : undefined;
    }, 120_000, 500);
    expect((await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: pool } })).status).toBe(200);
  });

  it('counts idempotent replays by operation, and webhook deliveries by outcome with their duration', async () => {
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      expect((await api.call('create_webhook', admin, { target_webhook: { url, events: ['user.created'] } })).status).toBe(200);
      const [apiBefore, workerBefore] = [await scrape(apiMetrics), await scrape(workerMetrics)];
      const create = () => api.call('create_user', admin, { target_user: { username: 'metrics-replayed' } }).set('idempotency-key', 'metrics-replay-1');
      const first = await create();
      expect(first.status).toBe(200);
      const again = await create();
      expect(again.body).toEqual(first.body);
      const apiAfter = await scrape(apiMetrics);
      expect(figure(apiAfter, 'workspace_server_idempotent_replays_total', { operation: 'create_user' }) - figure(apiBefore, 'workspace_server_idempotent_replays_total', { operation: 'create_user' })).toBe(1);
      const workerAfter = await waitFor('a webhook delivered', async () => {
        const samples = await scrape(workerMetrics);
        return figure(samples, 'workspace_server_webhook_deliveries_total', { outcome: 'delivered' }) > figure(workerBefore, 'workspace_server_webhook_deliveries_total', { outcome: 'delivered' }) ? samples : undefined;
      }, 30_000, 200);
      expect(figure(workerAfter, 'workspace_server_webhook_delivery_duration_seconds_count', { outcome: 'delivered' })).toBeGreaterThanOrEqual(1);
    } finally {
      await new Promise((done) => receiver.close(done));
    }
  });

  it('the public port has no /metrics', async () => {
    const res = await request(base).get('/metrics');
    expect(res.status).toBe(404);
    expect(res.text).not.toContain('workspace_server_');
  });

  it('METRICS_PORT=0 opens no listener, in the api or the worker', async () => {
    const quiet = await TestApi.start({ METRICS_PORT: 0 }, { worker: true });
    try {
      expect(quiet.app.get(MetricsServer).listener.address()).toBeNull();
      expect(quiet.worker?.get(MetricsServer).listener.address()).toBeNull();
    } finally {
      await quiet.close();
    }
  });
});
