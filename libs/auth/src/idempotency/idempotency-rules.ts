import { createHash } from 'node:crypto';
import { ApiError, ErrorCode } from '@ws/common';
import { OperationName, OPERATIONS, OperationSpec } from '../operations';

/** The request header, as Node lower-cases it. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** A replayed answer carries this header (`true`), so a client can tell a replay from a first answer. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';
/** How long a key replays its first answer, from the first request (and then the worker removes it). */
export const IDEMPOTENCY_KEY_TTL_SECONDS = 24 * 3600;

/** 1-255 visible ASCII characters (0x21-0x7E): a UUID, a ULID, an order number. */
const KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;
/** Authentication, not the request: the same request sent with Basic credentials instead of body ones is the same. */
const CREDENTIAL_FIELDS = new Set(['api_key', 'api_key_secret']);

/** Whether an operation takes an `Idempotency-Key` (`idempotent: true` in the catalog); others ignore the header. */
export function isIdempotent(operation: OperationName): boolean {
  return (OPERATIONS[operation] as OperationSpec).idempotent === true;
}

/** The header's key, or a 400 naming the header when it is not 1-255 visible ASCII characters (or sent twice). */
export function parseIdempotencyKey(header: string | string[]): string {
  if (typeof header !== 'string') throw new ApiError(ErrorCode.InvalidRequest, 'Idempotency-Key must be sent once');
  if (!KEY_FORMAT.test(header)) {
    throw new ApiError(ErrorCode.InvalidRequest, 'Idempotency-Key must be 1-255 visible ASCII characters (no spaces)');
  }
  return header;
}

/** JSON with every object's keys sorted, at every depth: equal values give equal text whatever the key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** SHA-256 (hex) of a request body's canonical JSON without the credentials. */
export function requestFingerprint(body: unknown): string {
  const fields = body !== null && typeof body === 'object' && !Array.isArray(body)
    ? Object.fromEntries(Object.entries(body as Record<string, unknown>).filter(([name]) => !CREDENTIAL_FIELDS.has(name)))
    : {};
  return createHash('sha256').update(canonicalJson(fields)).digest('hex');
}

/**
 * Whether an answer is final for its request and is stored to be replayed: successes and the 4xx refusals a
 * retry of the same body would get again (400, 403, 404, a 409 conflict). Answers that say "try again later"
 * are not stored, so a retry with the same key runs the request again: every 5xx (503 outages and no capacity,
 * 500), 429, and 409 `invalid_state` (the target is not in a state that allows it yet, e.g. not running).
 */
export function isFinalAnswer(status: number, code?: ErrorCode): boolean {
  return status < 500 && status !== 429 && code !== ErrorCode.InvalidState;
}
