import { Injectable } from '@nestjs/common';
import { ApiError, ErrorCode } from '@ws/common';
import { forbidden } from './access.service';
import { ApiKeyAuthenticator } from './api-key-authenticator';
import { AuthRateLimiter } from './auth-rate-limiter';
import type { Caller } from './caller';
import { authenticateKey } from './operation.guard';
import { missingPermissions, Permission } from './permissions';

/** What an operator's request carries: its address (Fastify's, by TRUSTED_PROXIES) and headers. */
export interface OperatorRequest {
  ip?: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * For operator pages served outside Nest's routes (the queue dashboard): HTTP Basic with the api_key as user
 * name and its secret as password, checked as the operation guard checks a key (same cache, same failed-
 * authentication limits: 401, then 429), then the permission. Only the Authorization header is read: a page
 * has no JSON body of credentials. A Read Only key is refused: such pages act as well as show.
 */
@Injectable()
export class OperatorAuthenticator {
  constructor(
    private readonly authenticator: ApiKeyAuthenticator,
    private readonly limiter: AuthRateLimiter,
  ) {}

  /** The caller holding `permission`, or an ApiError: 401 (no or bad credentials), 429, 403 (`what` names the page). */
  async require(request: OperatorRequest, permission: Permission, what: string): Promise<Caller> {
    const caller = await authenticateKey(this.authenticator, this.limiter, { ip: request.ip, headers: request.headers });
    if (caller.readOnly) throw new ApiError(ErrorCode.Forbidden, `The API key is Read Only and ${what} writes`);
    const missing = missingPermissions(caller.permissions, [permission]);
    if (missing.length) throw forbidden(missing, what);
    return caller;
  }
}
