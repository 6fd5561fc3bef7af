import { randomUUID } from 'node:crypto';
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger, Optional } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, dependencyOutage, ErrorCode, httpStatusFor, RETRY_AFTER_SECONDS } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { ReplayedAnswer } from './replayed-answer';

interface ErrorBody {
  status: number;
  body: Record<string, unknown>;
  /** Becomes the Retry-After header. */
  retryAfterSeconds?: number;
}

/** Fastify's own errors (body parsing, limits) by code. */
const FASTIFY_ERRORS: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [ErrorCode.PayloadTooLarge, 'Request body is too large'],
  FST_ERR_CTP_INVALID_JSON_BODY: [ErrorCode.InvalidRequest, 'Request body is not valid JSON'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [ErrorCode.InvalidRequest, 'Request body is empty'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [ErrorCode.InvalidRequest, 'Content-Length does not match the body'],
};

const logger = new Logger('Errors');

/**
 * Every failure leaves as `{error_message}` with the status of its code; an unexpected one gets an error_id, never a
 * stack. The error_id is the request's id when known (`requestId`: Fastify's, echoed in X-Request-Id and on every
 * log line of the request), so the answer, the log line and the header name the same request.
 */
export function describeError(error: unknown, requestId?: string): ErrorBody {
  if (error instanceof ReplayedAnswer) return { status: error.status, body: error.body };
  if (error instanceof ApiError) {
    return { status: httpStatusFor(error.code), body: { error_message: error.message, ...error.details }, retryAfterSeconds: error.retryAfterSeconds };
  }
  if (error instanceof HttpException) {
    const status = error.getStatus();
    if (status === 404) return { status, body: { error_message: 'Unknown operation' } };
    if (status < 500) return { status, body: { error_message: error.message } };
  }
  const fastifyCode = (error as { code?: unknown })?.code;
  if (typeof fastifyCode === 'string' && FASTIFY_ERRORS[fastifyCode]) {
    const [code, message] = FASTIFY_ERRORS[fastifyCode];
    return { status: httpStatusFor(code), body: { error_message: message } };
  }
  const statusCode = (error as { statusCode?: unknown })?.statusCode;
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) {
    return { status: statusCode, body: { error_message: (error as Error).message } };
  }
  // PostgreSQL or Redis down, stalled or refusing: the client may retry, so 503 (never 500).
  const dependency = dependencyOutage(error);
  if (dependency) {
    logger.warn(`dependency outage (${dependency}): ${(error as Error)?.message ?? String(error)}`);
    return { status: httpStatusFor(ErrorCode.Unavailable), body: { error_message: `${dependency} is unavailable; retry later` }, retryAfterSeconds: RETRY_AFTER_SECONDS };
  }
  const errorId = requestId || randomUUID().replace(/-/g, '');
  logger.error(`error_id=${errorId} ${(error as Error)?.stack ?? String(error)}`);
  return { status: 500, body: { error_message: 'Internal error', error_id: errorId } };
}

/**
 * Which dependency a 503 blames, for the outage counter: PostgreSQL and Redis as dependencyOutage tells them,
 * `other` for the rest of the 503s (a Docker host or VNC server that did not answer, the object store); none
 * for no_capacity, which is a full fleet, not an outage.
 */
export function outageDependency(error: unknown, status: number): string | null {
  if (status !== 503 || error instanceof ReplayedAnswer) return null;
  if (error instanceof ApiError && error.code === ErrorCode.NoCapacity) return null;
  const dependency = dependencyOutage(error);
  if (dependency === 'PostgreSQL') return 'postgresql';
  if (dependency === 'Redis' || (error instanceof ApiError && /^Redis /.test(error.message))) return 'redis';
  return 'other';
}

/**
 * Sends `error` as describeError says, counting a dependency outage; every 503 says when to come back (a service
 * that knows better sets its own). Nest's routes reach it through ApiExceptionFilter, the operation routes directly.
 */
export function sendError(reply: FastifyReply, requestId: string | undefined, error: unknown, metrics?: Metrics): void {
  const { status, body, retryAfterSeconds } = describeError(error, requestId);
  const outage = outageDependency(error, status);
  if (outage) metrics?.dependencyOutages.inc({ dependency: outage });
  const retryAfter = retryAfterSeconds ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
  if (retryAfter !== undefined) void reply.header('retry-after', String(retryAfter));
  void reply.status(status).header('content-type', 'application/json; charset=utf-8').send(body);
}

@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  constructor(@Optional() private readonly metrics?: Metrics) {}

  catch(error: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw error;
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const request = host.switchToHttp().getRequest<FastifyRequest | undefined>();
    sendError(reply, request?.id, error, this.metrics);
  }
}
