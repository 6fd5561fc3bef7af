import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import type { HTTPStatus } from '@bull-board/api/dist/types';
import { FastifyAdapter as BullBoardAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OperatorAuthenticator } from '@ws/auth';
import { RETRY_AFTER_SECONDS } from '@ws/common';
import { JobProducer, QUEUES, RedisConnections } from '@ws/queue';
import { originAllowed } from '../client/browser-request-guard';
import { describeError } from '../errors/api-exception.filter';

/** Where the dashboard is served: the page, its static files (`/static/...`) and its JSON api (`/api/...`). */
export const QUEUE_DASHBOARD_PATH = '/admin/queues';
const WHAT = 'the queue dashboard';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The page's policy: everything from this origin (the package's page links a web font stylesheet of another
 * site: `withoutExternalLinks` drops that link, and this would refuse it). Inline styles are the React UI's own.
 */
export const QUEUE_DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export interface QueueDashboardDeps {
  operators: OperatorAuthenticator;
  jobs: JobProducer;
  redis: RedisConnections;
}

/**
 * The BullMQ dashboard (@bull-board, its page and files from the npm package) at /admin/queues, listing every
 * queue of libs/queue, for operators only.
 *
 * Exempt from the api's global guard, explicitly: its routes are Fastify's, registered here outside Nest (as
 * the browser client's files are), so OperationGuard never sees them, and it would refuse them anyway (they
 * declare no operation). Instead every route of this plugin — page, static files, api — passes `admit` first:
 * HTTP Basic with an API key (user name) and its secret (password) holding `Queues Admin` and not Read Only,
 * checked by @ws/auth's OperatorAuthenticator with the failed-authentication limits of every operation.
 * Refusals are the api's JSON `{error_message}`: 401 with `WWW-Authenticate: Basic`, 403, 429, 503.
 * Requests that change something must not come from another site's page (a browser re-sends Basic
 * credentials on its own): an `Origin` other than this service's is refused.
 *
 * Call before the application is initialised (Fastify loads the plugin when it gets ready).
 */
export function registerQueueDashboard(fastify: FastifyInstance, deps: QueueDashboardDeps, publicBaseUrl: string): void {
  const board = new BullBoardAdapter();
  board.setBasePath(QUEUE_DASHBOARD_PATH);
  const names = Object.values(QUEUES);
  let held: Queue[] = names.map((name) => deps.jobs.queue(name));
  const { replaceQueues } = createBullBoard({
    queues: held.map((queue) => new BullMQAdapter(queue)),
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'workspace-server queues' } },
  });
  // Thrown errors (Redis failing mid-request) leave in the api's shape; the package's own 4xx answers are its UI's.
  // (The package's type lists fewer statuses than its Fastify adapter sends: 503 for an outage passes through.)
  board.setErrorHandler((error) => {
    const { status, body } = describeError(error);
    return { status: status as HTTPStatus, body };
  });
  /** JobProducer replaces a queue whose connection broke at start: show the one it uses now. */
  const refreshQueues = () => {
    const current = names.map((name) => deps.jobs.queue(name));
    if (current.some((queue, i) => queue !== held[i])) {
      held = current;
      replaceQueues(current.map((queue) => new BullMQAdapter(queue)));
    }
  };
  const publicOrigin = new URL(publicBaseUrl).origin;
  const routes: string[] = [];
  registered.set(fastify, routes);

  const admit = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    try {
      if (!SAFE_METHODS.has(request.method) && !originAllowed(request.headers.origin, request.headers.host, publicOrigin)) {
        return refuse(reply, 403, { error_message: 'Cross-site requests are refused: this page is not part of this service' });
      }
      await deps.operators.require(request, 'Queues Admin', WHAT);
      deps.redis.assertConnected();
      refreshQueues();
      return undefined;
    } catch (error) {
      const { status, body, retryAfterSeconds } = describeError(error, request.id);
      if (status === 401) void reply.header('www-authenticate', 'Basic realm="workspace-server queues", charset="UTF-8"');
      // As the api's exception filter: every 503 says when to come back.
      const retryAfter = retryAfterSeconds ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
      if (retryAfter !== undefined) void reply.header('retry-after', String(retryAfter));
      return refuse(reply, status, body);
    }
  };

  void fastify.register(async (scope) => {
    scope.addHook('onRoute', (route) => {
      routes.push(...(Array.isArray(route.method) ? route.method : [route.method]).map((method) => `${method} ${route.url}`));
    });
    scope.addHook('onRequest', admit);
    scope.addHook('onSend', async (request, reply, payload) => {
      const type = String(reply.getHeader('content-type') ?? '');
      if (type.startsWith('text/html')) {
        void reply.header('content-security-policy', QUEUE_DASHBOARD_CSP);
        void reply.header('referrer-policy', 'no-referrer');
        if (typeof payload === 'string') payload = withoutExternalLinks(payload);
      }
      // The page and the api's answers show live state to one operator: never stored. Static files keep their caching.
      if (type.startsWith('text/html') || type.startsWith('application/json')) void reply.header('cache-control', 'no-store');
      void reply.header('x-content-type-options', 'nosniff');
      return payload;
    });
    await scope.register(board.registerPlugin(), { prefix: QUEUE_DASHBOARD_PATH });
  });
}

const registered = new WeakMap<FastifyInstance, string[]>();

/** `METHOD url` of every route the dashboard registered on this instance, once it is ready (for the tests). */
export function queueDashboardRoutes(fastify: FastifyInstance): readonly string[] {
  return registered.get(fastify) ?? [];
}

/** The page without `<link>`s to other sites (the package's web font stylesheet): the dashboard uses local fonts. */
export function withoutExternalLinks(html: string): string {
  return html.replace(/<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?\/\/[^>]*>/gi, '');
}

function refuse(reply: FastifyReply, status: number, body: Record<string, unknown>): FastifyReply {
  return reply.code(status).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
}
