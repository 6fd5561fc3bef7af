import { Metrics } from './metrics';
import { MetricsListener } from './metrics-listener';
import { metricsPort } from './metrics.module';

describe('metrics', () => {
  it('takes METRICS_PORT, else the role default; the CLI never listens', () => {
    expect(metricsPort({ METRICS_PORT: undefined }, 'api')).toBe(9464);
    expect(metricsPort({ METRICS_PORT: undefined }, 'worker')).toBe(9465);
    expect(metricsPort({ METRICS_PORT: 0 }, 'api')).toBe(0);
    expect(metricsPort({ METRICS_PORT: 9100 }, 'worker')).toBe(9100);
    expect(metricsPort({ METRICS_PORT: 9100 }, 'none')).toBe(0);
  });

  it('names every metric with the prefix and Prometheus conventions', async () => {
    const metrics = new Metrics();
    const names = (await metrics.registry.getMetricsAsJSON()).map((m) => ({ name: m.name, type: String(m.type) }));
    expect(names.length).toBeGreaterThan(20);
    for (const { name, type } of names) {
      expect(name).toMatch(/^workspace_server_[a-z_]+$/);
      if (type === 'counter') expect(name).toMatch(/_total$/);
      if (type === 'histogram') expect(name).toMatch(/_seconds$/);
      if (type === 'gauge') expect(name).not.toMatch(/_total$/);
    }
  });

  it('serves /metrics on its own listener, 404 elsewhere, and a failing collector leaves the rest', async () => {
    const metrics = new Metrics();
    const errors: string[] = [];
    metrics.onScrape('broken', async () => {
      metrics.queueJobs.reset();
      throw new Error('Redis is down');
    });
    metrics.onScrape('fine', async () => metrics.workspaces.set({ status: 'running', server: 'a' }, 3));
    metrics.httpRequests.inc({ operation: 'get_user', status_code: '200' });
    const listener = new MetricsListener(metrics, 1000);
    const log = jest.spyOn((listener as unknown as { logger: { warn: (m: string) => void } }).logger, 'warn').mockImplementation((m) => void errors.push(m));
    await listener.listen(0, '127.0.0.1');
    try {
      const base = `http://127.0.0.1:${listener.address()?.port}`;
      const res = await fetch(`${base}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('workspace_server_http_requests_total{operation="get_user",status_code="200"} 1');
      expect(text).toContain('workspace_server_workspaces{status="running",server="a"} 3');
      expect(text).not.toContain('workspace_server_queue_jobs{');
      expect(errors).toEqual([expect.stringContaining('broken not collected: Redis is down')]);
      expect((await fetch(`${base}/`)).status).toBe(404);
      expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(405);
    } finally {
      log.mockRestore();
      await listener.close();
    }
    expect(listener.address()).toBeNull();
  });
});
