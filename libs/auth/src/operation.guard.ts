import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiError, ErrorCode, toWireId, unstorableTextReason } from '@ws/common';
import { assignLogFields } from '@ws/logging';
import { forbidden } from './access.service';
import { ApiKeyAuthenticator, KeyAuthenticationError } from './api-key-authenticator';
import { AuthRateLimiter } from './auth-rate-limiter';
import type { Caller } from './caller';
import { OPERATION_KEY, PUBLIC_ROUTE_KEY } from './operation.decorator';
import { OperationName, OPERATIONS } from './operations';
import { missingPermissions } from './permissions';

export interface RequestLike {
  /** The client's address (Fastify's, by TRUSTED_PROXIES). */
  ip?: string;
  body?: unknown;
  headers: Record<string, string | string[] | undefined>;
  caller?: Caller;
}

/**
 * The check every operation passes before its handler: the key (authenticateKey), Read Only against the operation's
 * writes, and the catalog's permissions. The caller goes onto the request (and its key id into the request's log
 * fields). The api's operation routes call it directly (apps/api/src/public-api/operation-routes.ts); the guard
 * below calls it for any other route that declares an operation.
 */
@Injectable()
export class OperationAuthorizer {
  constructor(
    private readonly authenticator: ApiKeyAuthenticator,
    private readonly limiter: AuthRateLimiter,
  ) {}

  /** The caller, or a promise of it when the key is not held in memory; throws (or rejects) with the refusal. */
  authorize(operation: OperationName, request: RequestLike): Caller | Promise<Caller> {
    const caller = authenticateKey(this.authenticator, this.limiter, request);
    return caller instanceof Promise ? caller.then((found) => this.admit(operation, request, found)) : this.admit(operation, request, caller);
  }

  private admit(operation: OperationName, request: RequestLike, caller: Caller): Caller {
    const spec = OPERATIONS[operation];
    if (spec.writes && caller.readOnly) {
      throw new ApiError(ErrorCode.Forbidden, `The API key is Read Only and ${operation} writes`);
    }
    const missing = missingPermissions(caller.permissions, spec.permissions);
    if (missing.length) throw forbidden(missing);
    request.caller = caller;
    assignLogFields({ api_key_id: toWireId(caller.apiKeyId) });
    return caller;
  }
}

/** Global guard of Nest's routes: closed by default. A route must be an @Operation (key + permissions) or an explicit @PublicRoute. */
@Injectable()
export class OperationGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly authorizer: OperationAuthorizer,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    const operation = this.reflector.getAllAndOverride<OperationName | undefined>(OPERATION_KEY, targets);
    if (!operation) {
      if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE_KEY, targets)) return true;
      throw new ApiError(ErrorCode.Forbidden, 'This route declares no permissions and is refused');
    }
    await this.authorizer.authorize(operation, context.switchToHttp().getRequest<RequestLike>());
    return true;
  }
}

/**
 * A blocked address or key gets 429 before any work. A key held in memory (the usual case) is checked
 * without a Redis round trip, and without a promise; one that would cost a query first asks Redis whether another
 * replica blocked it. Every 401 is counted against the address, and against the key when the key exists. The
 * operations', and the operator's routes outside Nest (OperatorAuthenticator).
 */
export function authenticateKey(authenticator: ApiKeyAuthenticator, limiter: AuthRateLimiter, request: RequestLike): Caller | Promise<Caller> {
  const address = request.ip ?? '';
  let apiKey: string | undefined;
  try {
    limiter.assertNotBlockedHere({ address });
    const credentials = readCredentials(request);
    apiKey = credentials.apiKey;
    limiter.assertNotBlockedHere({ address, apiKey });
    return authenticator.cachedCaller(apiKey, credentials.secret) ?? authenticateUncached(authenticator, limiter, address, credentials);
  } catch (err) {
    return refused(limiter, err, address, apiKey);
  }
}

async function authenticateUncached(authenticator: ApiKeyAuthenticator, limiter: AuthRateLimiter, address: string, credentials: { apiKey: string; secret: string }): Promise<Caller> {
  const { apiKey, secret } = credentials;
  try {
    if (!authenticator.isCached(apiKey)) await limiter.assertNotBlocked({ address, apiKey });
    return await authenticator.authenticate(apiKey, secret);
  } catch (err) {
    return refused(limiter, err, address, apiKey);
  }
}

/** Counts the failure (a 401, or a 429 once over the limit) and rejects with what the client is told. */
async function refused(limiter: AuthRateLimiter, err: unknown, address: string, apiKey: string | undefined): Promise<never> {
  throw await limiter.failed(err, { address, apiKey: err instanceof KeyAuthenticationError && err.keyExists ? apiKey : undefined });
}

/** From the JSON body (the spec's scheme) or, as an addition, an HTTP Basic Authorization header. */
export function readCredentials(request: RequestLike): { apiKey: string; secret: string } {
  const body = (request.body ?? {}) as Record<string, unknown>;
  if (body.api_key !== undefined || body.api_key_secret !== undefined) {
    if (typeof body.api_key !== 'string' || typeof body.api_key_secret !== 'string') {
      throw new ApiError(ErrorCode.Unauthenticated, 'api_key and api_key_secret must both be strings');
    }
    return storable({ apiKey: body.api_key, secret: body.api_key_secret }, 'in the body');
  }
  const header = request.headers.authorization;
  if (typeof header === 'string' && /^basic /i.test(header)) {
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) return storable({ apiKey: decoded.slice(0, colon), secret: decoded.slice(colon + 1) }, 'in the Authorization header');
  }
  throw new ApiError(ErrorCode.Unauthenticated, 'Missing api_key and api_key_secret');
}

/** A key with a NUL would fail the lookup in PostgreSQL (a 500); no real key has one, so it is a bad request. */
function storable(credentials: { apiKey: string; secret: string }, where: string): { apiKey: string; secret: string } {
  for (const [field, value] of [['api_key', credentials.apiKey], ['api_key_secret', credentials.secret]]) {
    const reason = unstorableTextReason(value);
    if (reason) throw new ApiError(ErrorCode.InvalidRequest, `${field} ${where} ${reason}`);
  }
  return credentials;
}
