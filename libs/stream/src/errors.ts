import { ApiError, ErrorCode } from '@ws/common';

/** Why an RFB operation failed; stable strings callers can switch on. */
export type RfbErrorKind =
  /** TCP connect refused (nothing listens on host:port). */
  | 'connection_refused'
  /** Any other socket-level failure (unreachable host, reset, DNS). */
  | 'connection_failed'
  /** A bounded wait (connect, handshake, frame) ran out. */
  | 'timeout'
  /** The server rejected our credentials; `reason` holds the server's reason string when it sent one. */
  | 'auth_failed'
  /** The server requires VNC authentication but no password was given. */
  | 'auth_required'
  /** The server offers no security type this library implements (only None and VNC Authentication are). */
  | 'unsupported_security'
  /** The peer broke RFC 6143 (bad version string, unknown message type, impossible length...). */
  | 'protocol'
  /** The peer closed the connection in the middle of an exchange. */
  | 'closed';

export class RfbError extends Error {
  constructor(
    readonly kind: RfbErrorKind,
    message: string,
    /** The server's own reason string (security failure), when it sent one. */
    readonly reason?: string,
  ) {
    super(message);
    this.name = 'RfbError';
  }
}

/** An option outside its allowed range (e.g. screenshot width). A RangeError, so generic handlers recognise it. */
export class StreamRangeError extends RangeError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly allowed: string,
  ) {
    super(`Invalid ${field} (${String(value)}): must be ${allowed}`);
    this.name = 'StreamRangeError';
  }
}

/**
 * Maps this library's errors to the API's error model: a bad option is the caller's fault
 * (invalid_request); everything about the VNC server is a dependency failing (unavailable).
 * Returns undefined for errors that did not come from this library.
 */
export function toApiError(error: unknown): ApiError | undefined {
  if (error instanceof StreamRangeError) return new ApiError(ErrorCode.InvalidRequest, error.message);
  if (error instanceof RfbError) return new ApiError(ErrorCode.Unavailable, `Desktop stream: ${error.message}`, { stream_error: error.kind });
  return undefined;
}
