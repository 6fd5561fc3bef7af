import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Metrics } from '@ws/metrics';

const PUBLIC_OPERATION = /^\/api\/public\/([a-z0-9_]+)$/;
/** Every request's start, kept on the request object (no per-request allocation beyond the number). */
const STARTED = Symbol('metrics start');

/**
 * The api's request metrics, from one Fastify hook pair: requests by operation and status code, latency by
 * operation, 401s (failed authentications) and 429s (rate-limit refusals). The operation is the @Operation name
 * of a `/api/public/<operation>` route, the route pattern of any other route, `unmatched` for a path no route
 * has: the label's values are bounded by the routes. `metrics` is read at each answer, so the hooks can be
 * registered before the application (which makes the Metrics) exists.
 */
export function registerHttpMetrics(fastify: FastifyInstance, metrics: () => Metrics | undefined): void {
  fastify.addHook('onRequest', async (request) => {
    (request as unknown as Record<symbol, number>)[STARTED] = performance.now();
  });
  fastify.addHook('onResponse', async (request, reply) => {
    const m = metrics();
    if (!m) return;
    const started = (request as unknown as Record<symbol, number | undefined>)[STARTED];
    const operation = operationOf(request);
    const status = reply.statusCode;
    m.httpRequests.inc({ operation, status_code: String(status) });
    if (started !== undefined) m.httpRequestDuration.observe({ operation }, (performance.now() - started) / 1000);
    if (status === 401) m.authFailures.inc({ operation });
    else if (status === 429) m.rateLimited.inc({ operation });
  });
}

export function operationOf(request: Pick<FastifyRequest, 'routeOptions'>): string {
  const route = request.routeOptions?.url;
  if (!route) return 'unmatched';
  return PUBLIC_OPERATION.exec(route)?.[1] ?? route;
}
