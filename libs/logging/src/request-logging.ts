import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { storage } from 'nestjs-pino/storage';
import { LogContext, rootLogger } from './log-context';

const CONTEXT = Symbol('logContext');
type WithContext = FastifyRequest & { [CONTEXT]?: LogContext };

/**
 * Per request: a log context carrying its `request_id` (the Fastify request id: X-Request-Id when sane), which
 * the handler adds to (assignLogFields: operation, api key, ids), and one `request completed` line with the method,
 * url, status and duration (error level for a 5xx). Registered before every other hook, so all of them log with it.
 */
export function registerRequestLogging(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request: WithContext, _reply, done) => {
    const logger = rootLogger();
    if (!logger) return done();
    const context = new LogContext(logger, { request_id: request.id });
    request[CONTEXT] = context;
    storage.run(context, done);
  });
  fastify.addHook('onResponse', (request: WithContext, reply, done) => {
    const context = request[CONTEXT];
    if (context) requestLine(context, request, reply);
    done();
  });
  fastify.addHook('onRequestAbort', (request: WithContext, done) => {
    const context = request[CONTEXT];
    if (context?.logger.isLevelEnabled('warn')) {
      context.logger.warn({ ...context.fields, req: { method: request.method, url: request.url } }, `${request.method} ${request.url} aborted by the client`);
    }
    done();
  });
}

function requestLine(context: LogContext, request: FastifyRequest, reply: FastifyReply): void {
  const status = reply.statusCode;
  const level = status >= 500 ? 'error' : 'info';
  if (!context.logger.isLevelEnabled(level)) return;
  const ms = reply.elapsedTime;
  const message = status >= 500 ? `${request.method} ${request.url} ${status} failed` : `${request.method} ${request.url} ${status} ${Math.round(ms)} ms`;
  context.logger[level]({ ...context.fields, req: { method: request.method, url: request.url }, res: { status_code: status }, responseTime: ms }, message);
}
