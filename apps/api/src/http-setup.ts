import type { FastifyInstance } from 'fastify';
import { ApiError, ErrorCode } from '@ws/common';

/**
 * Bodies are JSON whatever the Content-Type says (integrators' `curl -d` sends form encoding), and must
 * be objects. Parser errors reach Nest's exception filters, so they leave in the same shape as ours.
 */
export function configureFastify(fastify: FastifyInstance): void {
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, {});
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return done(new ApiError(ErrorCode.InvalidRequest, 'Request body is not valid JSON'), undefined);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return done(new ApiError(ErrorCode.InvalidRequest, 'Request body must be a JSON object'), undefined);
    }
    done(null, parsed);
  });
}
