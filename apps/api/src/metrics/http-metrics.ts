import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Metrics } from '@ws/metrics';

const PUBLIC_OPERATION = /^\/api\/public\/([a-z0-9_]+)$/;

/**
 * The api's request metrics, from one Fastify hook at each answer (latency is Fastify's own `elapsedTime`):
 * requests by operation and status code, latency by operation, 401s (failed authentications) and 429s
 * (rate-limit refusals). The operation is the @Operation name of a `/api/public/<operation>` route, the route
 * pattern of any other route, `unmatched` for a path no route has: the label's values are bounded by the routes.
 * `metrics` is read at each answer, so the hook can be registered before the application (which makes the
 * Metrics) exists.
 */
export function registerHttpMetrics(fastify: FastifyInstance, metrics: () => Metrics | undefined): void {
  fastify.addHook('onResponse', (request, reply, done) => {
    const m = metrics();
    if (m) {
      const operation = operationOf(request);
      const status = reply.statusCode;
      m.httpRequests.inc({ operation, status_code: String(status) });
      m.httpRequestDuration.observe({ operation }, reply.elapsedTime / 1000);
      if (status === 401) m.authFailures.inc({ operation });
      else if (status === 429) m.rateLimited.inc({ operation });
    }
    done();
  });
}

export function operationOf(request: Pick<FastifyRequest, 'routeOptions'>): string {
  const route = request.routeOptions?.url;
  if (!route) return 'unmatched';
  return PUBLIC_OPERATION.exec(route)?.[1] ?? route;
}
