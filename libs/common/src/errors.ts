/**
 * Every failure the API reports has a code; the HTTP status is derived from the code in one place
 * (`httpStatusFor`), so a service never chooses a status. docs/errors.md lists the mapping.
 */
export enum ErrorCode {
  /** Malformed body: not JSON, wrong type, missing or out-of-range field. */
  InvalidRequest = 'invalid_request',
  /** An identifier that names nothing (or is not an identifier at all). */
  InvalidId = 'invalid_id',
  /** No credentials, unknown key, wrong secret, expired or revoked key. */
  Unauthenticated = 'unauthenticated',
  /** Authenticated but not allowed: missing permission, Read Only key, target-dependent rule. */
  Forbidden = 'forbidden',
  /** The operation name is not part of the API. */
  UnknownOperation = 'unknown_operation',
  /** A public link (a cast key) that names nothing; operations use InvalidId (400) for unknown ids. */
  NotFound = 'not_found',
  /** The request is valid but conflicts with current state (duplicate name, user still has workspaces). */
  Conflict = 'conflict',
  /** The target exists but is not in a state that allows the operation (workspace not running). */
  InvalidState = 'invalid_state',
  PayloadTooLarge = 'payload_too_large',
  /** A browser route (`/api/client/*`) posted with a Content-Type other than application/json. */
  UnsupportedMediaType = 'unsupported_media_type',
  RateLimited = 'rate_limited',
  /** No server has room for the request right now; retrying later may succeed. */
  NoCapacity = 'no_capacity',
  /** A dependency (Docker host, database) did not answer in time. */
  Unavailable = 'unavailable',
  Internal = 'internal',
}

export function httpStatusFor(code: ErrorCode): number {
  switch (code) {
    case ErrorCode.InvalidRequest:
    case ErrorCode.InvalidId:
      return 400;
    case ErrorCode.Unauthenticated:
      return 401;
    case ErrorCode.Forbidden:
      return 403;
    case ErrorCode.UnknownOperation:
    case ErrorCode.NotFound:
      return 404;
    case ErrorCode.Conflict:
    case ErrorCode.InvalidState:
      return 409;
    case ErrorCode.PayloadTooLarge:
      return 413;
    case ErrorCode.UnsupportedMediaType:
      return 415;
    case ErrorCode.RateLimited:
      return 429;
    case ErrorCode.NoCapacity:
    case ErrorCode.Unavailable:
      return 503;
    case ErrorCode.Internal:
      return 500;
    default: {
      const unreachable: never = code;
      throw new Error(`unmapped error code ${String(unreachable)}`);
    }
  }
}

export interface ApiErrorOptions {
  /** Sent as the Retry-After header (whole seconds): when a 429 or 503 may be retried. */
  retryAfterSeconds?: number;
  /**
   * A guessed credential that matched nothing (an unknown cast link key): counted against the source address
   * like a failed authentication, whatever the status, so keys cannot be enumerated quickly.
   */
  failedCredential?: boolean;
}

export class ApiError extends Error {
  readonly retryAfterSeconds?: number;
  readonly failedCredential: boolean;

  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Extra top-level fields for the error body (e.g. operational_status of a starting workspace). */
    readonly details: Record<string, unknown> = {},
    options: ApiErrorOptions = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.failedCredential = options.failedCredential ?? false;
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = Math.max(1, Math.ceil(options.retryAfterSeconds));
  }

  static invalidId(field: string, value: unknown): ApiError {
    return new ApiError(ErrorCode.InvalidId, `Invalid ${field} (${String(value)})`);
  }
}
