/**
 * Recognises errors that mean "PostgreSQL or Redis is down, stalled or overloaded", as the drivers raise
 * them (pg, pg-pool, TypeORM, ioredis, BullMQ), so the api answers 503 with Retry-After instead of 500.
 * Only failures of the dependency itself count: a constraint violation or a bad command is our own bug.
 */
export type Dependency = 'PostgreSQL' | 'Redis' | 'A dependency';

/** Seconds a client should wait before retrying after a 503 (sent as Retry-After). */
export const RETRY_AFTER_SECONDS = 5;

/** Socket-level failures: whichever dependency the socket led to is unreachable. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED',
]);

/**
 * SQLSTATEs of an unavailable or overloaded server: class 08 (connection exception), 53 (insufficient
 * resources: too many connections, out of memory, disk full), 57P01-57P03 (shutting down, crashed, starting
 * up), 57014 (statement_timeout cancelled the statement), 55P03 (lock_timeout).
 */
const POSTGRES_STATE = /^(08[0-9A-Z]{3}|53[0-9A-Z]{3}|57P0[1-3]|57014|55P03)$/;

/** Messages pg and pg-pool raise without a code (timeouts and dropped connections). */
const POSTGRES_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  // The process is shutting down: a request still in flight when the pool closed may be retried elsewhere.
  'Cannot use a pool after calling end on the pool',
];

/** Messages ioredis and BullMQ raise while the connection is down, reconnecting or a command got no answer. */
const REDIS_MESSAGES = [
  'Command timed out',
  'Connection is closed',
  "Stream isn't writeable and enableOfflineQueue options is false",
  'Reached the max retries per request limit',
];

/** Redis replies that mean the server cannot serve right now (loading its data set, busy script, failover). */
const REDIS_REPLIES = /^(LOADING|BUSY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN) /;

/** Marks an error as raised by talking to `dependency` (for bare socket errors, which do not say whose they are). */
export function markDependency<E extends Error>(error: E, dependency: Exclude<Dependency, 'A dependency'>): E {
  return Object.assign(error, { dependency });
}

interface ErrorLike {
  dependency?: unknown;
  name?: unknown;
  message?: unknown;
  code?: unknown;
  severity?: unknown;
  driverError?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** Which dependency failed, or null when the error is not a dependency outage. */
export function dependencyOutage(error: unknown): Dependency | null {
  return classify(error, 0, new Set());
}

function classify(error: unknown, depth: number, seen: Set<unknown>): Dependency | null {
  if (depth > 4 || error === null || typeof error !== 'object' || seen.has(error)) return null;
  seen.add(error);
  const e = error as ErrorLike;
  const own = classifyOne(e);
  if (own) return own;
  // Wrappers: TypeORM's QueryFailedError keeps pg's error as driverError; Node's AggregateError (a host
  // with several addresses) keeps one error per address; newer drivers chain with `cause`.
  const inner = [e.driverError, e.cause, ...(Array.isArray(e.errors) ? e.errors : [])];
  for (const candidate of inner) {
    const found = classify(candidate, depth + 1, seen);
    if (found) return found;
  }
  return null;
}

function classifyOne(e: ErrorLike): Dependency | null {
  const message = typeof e.message === 'string' ? e.message : '';
  const code = typeof e.code === 'string' ? e.code : '';
  const name = typeof e.name === 'string' ? e.name : '';
  if (POSTGRES_STATE.test(code) && (typeof e.severity === 'string' || name === 'QueryFailedError')) return 'PostgreSQL';
  if (POSTGRES_MESSAGES.some((m) => message.startsWith(m))) return 'PostgreSQL';
  if (name === 'MaxRetriesPerRequestError' || REDIS_MESSAGES.some((m) => message.startsWith(m))) return 'Redis';
  if (name === 'ReplyError' && REDIS_REPLIES.test(message)) return 'Redis';
  if (NETWORK_CODES.has(code)) return e.dependency === 'PostgreSQL' || e.dependency === 'Redis' ? e.dependency : 'A dependency';
  return null;
}
