import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, httpStatusFor } from '@ws/common';

/** The browser client's routes: they set the stream cookie or hand out sessions, so they are what a foreign page would forge. */
const BROWSER_ROUTE_PREFIX = '/api/client/';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses cross-site posts to `/api/client/*`. A page of another site can make a browser post a form
 * (`text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data`) there without asking, and the
 * answer would set the victim's stream cookie to the attacker's session. Such forms cannot send
 * `application/json`, and a script of another site cannot either without a CORS preflight we never grant;
 * the `Origin` a browser sends must also be this service's. A request without `Origin` (curl, a backend)
 * carries no ambient credentials and passes. `/api/public/*` is not touched: it takes credentials only in
 * the request, so `curl -d` keeps working.
 */
export function registerBrowserRequestGuard(fastify: FastifyInstance, publicBaseUrl: string): void {
  const publicOrigin = new URL(publicBaseUrl).origin;
  fastify.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    // The matched route, not the raw url: no encoding or query string can move a request around the check.
    const route = request.routeOptions.url;
    if (!route?.startsWith(BROWSER_ROUTE_PREFIX) || SAFE_METHODS.has(request.method)) return done();
    if (!originAllowed(request.headers.origin, request.headers.host, publicOrigin)) {
      return void refuse(reply, ErrorCode.Forbidden, 'Cross-site requests are refused: this page is not part of this service');
    }
    if (!isJson(request.headers['content-type'])) {
      return void refuse(reply, ErrorCode.UnsupportedMediaType, 'Send the body as application/json');
    }
    done();
  });
}

/**
 * True when a request may act on this service's cookies: no `Origin` (not a browser), or one whose host is
 * the request's `Host` or whose origin is `PUBLIC_BASE_URL`'s (a proxy in front may rewrite `Host`).
 * `Origin: null` (sandboxed frames, file pages) is refused.
 */
export function originAllowed(origin: string | undefined, host: string | undefined, publicOrigin: string): boolean {
  if (origin === undefined) return true;
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    return false;
  }
  return (host !== undefined && parsed.host === host) || parsed.origin === publicOrigin;
}

function isJson(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0].trim().toLowerCase() === 'application/json';
}

function refuse(reply: FastifyReply, code: ErrorCode, message: string): FastifyReply {
  return reply.code(httpStatusFor(code)).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify({ error_message: message }));
}
