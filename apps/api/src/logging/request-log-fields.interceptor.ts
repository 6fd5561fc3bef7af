import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import type { Caller } from '@ws/auth';
import { parseId, toWireId } from '@ws/common';
import { assignLogFields } from '@ws/logging';
import { operationOf } from '../metrics/http-metrics';

/**
 * After the guard: the request's log lines (its `request completed` line included) get the operation, the
 * caller's api key id, and the workspace and user the body names when they are well-formed ids.
 */
@Injectable()
export class RequestLogFields implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() === 'http') {
      const request = context.switchToHttp().getRequest<FastifyRequest & { caller?: Caller }>();
      const body = (request.body ?? {}) as Record<string, unknown>;
      const fields: Record<string, string> = { operation: operationOf(request) };
      if (request.caller) fields.api_key_id = toWireId(request.caller.apiKeyId);
      for (const name of ['workspace_id', 'user_id'] as const) {
        const id = typeof body[name] === 'string' ? parseId(body[name] as string) : null;
        if (id) fields[name] = toWireId(id);
      }
      assignLogFields(fields);
    }
    return next.handle();
  }
}
