import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import { type Metrics, withTimeout } from './metrics';

/** A readiness check: resolves when its dependency answers, rejects (or runs past the bound) when not. */
export type ReadinessProbe = () => Promise<unknown>;

/**
 * The Prometheus listener: its own HTTP server on METRICS_HOST:METRICS_PORT, never the public port. It answers
 * `GET /metrics` (and HEAD) with the text exposition, `/healthz` (alive: the process serves; touches nothing)
 * and, once a process registered readiness checks, `/readyz` (200, or 503 naming each check that failed);
 * anything else is a 404. Collectors and checks are bounded by `timeoutMs`, below a scraper's usual 10 s.
 */
export class MetricsListener {
  private readonly logger = new Logger('Metrics');
  private server: Server | null = null;
  private readonly readiness = new Map<string, ReadinessProbe>();

  constructor(
    private readonly metrics: Metrics,
    private readonly timeoutMs = 5000,
  ) {}

  async listen(port: number, host: string): Promise<void> {
    const server = createServer((request, response) => void this.answer(request, response));
    server.keepAliveTimeout = 65_000; // longer than a scraper's idle interval between scrapes
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => this.logger.error(`metrics listener: ${err.message}`));
    this.server = server;
  }

  /** Adds a check to /readyz (`name` appears in a refusal: "Redis", "a Docker host"). */
  addReadinessCheck(name: string, probe: ReadinessProbe): void {
    this.readiness.set(name, probe);
  }

  /** Null when every check passed within the bound, else what failed (one line per check). */
  async notReady(): Promise<string[]> {
    const failures = await Promise.all([...this.readiness].map(([name, probe]) => withTimeout(Promise.resolve().then(probe), this.timeoutMs, `did not answer within ${this.timeoutMs} ms`).then(
      () => null,
      (err: Error) => `${name}: ${err.message}`,
    )));
    return failures.filter((f): f is string => f !== null);
  }

  /** Where it listens, or null when it does not. */
  address(): AddressInfo | null {
    return (this.server?.address() as AddressInfo | null) ?? null;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0];
    if (path === '/healthz') return send(response, 200, JSON_TYPE, JSON.stringify({ status: 'ok' }));
    if (path === '/readyz' && this.readiness.size > 0) {
      const failures = await this.notReady();
      if (failures.length === 0) return send(response, 200, JSON_TYPE, JSON.stringify({ status: 'ok' }));
      return send(response, 503, JSON_TYPE, JSON.stringify({ error_message: `Not ready: ${failures.join('; ')}` }), { 'retry-after': '5' });
    }
    if (path !== '/metrics') return send(response, 404, 'application/json; charset=utf-8', JSON.stringify({ error_message: 'Not found: the metrics are at /metrics' }));
    if (request.method !== 'GET' && request.method !== 'HEAD') return send(response, 405, 'application/json; charset=utf-8', JSON.stringify({ error_message: 'Use GET' }), { allow: 'GET, HEAD' });
    try {
      const text = await this.metrics.exposition({
        timeoutMs: this.timeoutMs,
        onError: (name, err) => this.logger.warn(`metrics: ${name} not collected: ${err.message}`),
      });
      send(response, 200, this.metrics.contentType, request.method === 'HEAD' ? '' : text);
    } catch (err) {
      this.logger.error(`metrics: ${(err as Error).message}`);
      send(response, 500, 'application/json; charset=utf-8', JSON.stringify({ error_message: 'Metrics could not be collected' }));
    }
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

function send(response: ServerResponse, status: number, contentType: string, body: string, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), ...headers });
  response.end(body);
}
