import type { FastifyInstance } from 'fastify';
import { parseId, toWireId } from '@ws/common';
import { assignLogFields } from '@ws/logging';
import { operationOf } from '../metrics/http-metrics';

/**
 * Once the body is read, before the route's handler: the request's log lines (its `request completed` line
 * included) get the operation and the workspace and user the body names, when those are well-formed ids. The
 * caller's api key id is added by the guard once the key is checked. A Fastify hook rather than a Nest
 * interceptor: each interceptor adds an rxjs pipeline and an async-context binding to every request.
 */
export function registerRequestLogFields(fastify: FastifyInstance): void {
  fastify.addHook('preHandler', (request, _reply, done) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    const fields: Record<string, string> = { operation: operationOf(request) };
    for (const name of ['workspace_id', 'user_id'] as const) {
      const id = typeof body[name] === 'string' ? parseId(body[name] as string) : null;
      if (id) fields[name] = toWireId(id);
    }
    assignLogFields(fields);
    done();
  });
}
