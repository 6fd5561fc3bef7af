/**
 * A statement cancelled while it waited for a lock (SQLSTATE 55P03, or 57014 from statement_timeout with
 * PostgreSQL's context "while locking/updating/deleting tuple", or on a statement that is only a blocking advisory
 * lock, which PostgreSQL gives no context): the rows were busy, not the server down. A caller that queues for a hot
 * lock (a launch for its server's placement lock and the seat counter's row) may run its transaction again; any
 * other cancelled statement stays an outage (503).
 */
export function isLockWaitTimeout(err: unknown): boolean {
  const { code, where } = driverError(err);
  if (code === '55P03') return true;
  if (code !== '57014') return false;
  if (typeof where === 'string' && /while (locking|updating|deleting) tuple/.test(where)) return true;
  const query = (err as { query?: unknown } | null)?.query;
  return typeof query === 'string' && /^\s*SELECT pg_advisory_xact_lock\(/.test(query);
}

/** lock_not_available (55P03): a lock was not had within lock_timeout (or at once, with NOWAIT). */
export function isLockNotAvailable(err: unknown): boolean {
  return driverError(err).code === '55P03';
}

/** pg's error, whether thrown bare or wrapped by TypeORM (QueryFailedError.driverError). */
function driverError(err: unknown): { code?: unknown; where?: unknown } {
  return ((err as { driverError?: unknown } | null)?.driverError ?? err ?? {}) as { code?: unknown; where?: unknown };
}
