/**
 * A statement cancelled while it waited for a row lock (SQLSTATE 55P03, or 57014 from statement_timeout with
 * PostgreSQL's context "while locking/updating/deleting tuple"): the rows were busy, not the server down. A caller
 * that queues for a hot row (a launch for its server's row and the seat counter) may run its transaction again;
 * any other cancelled statement stays an outage (503).
 */
export function isLockWaitTimeout(err: unknown): boolean {
  const { code, where } = driverError(err);
  if (code === '55P03') return true;
  return code === '57014' && typeof where === 'string' && /while (locking|updating|deleting) tuple/.test(where);
}

/** lock_not_available (55P03): a lock was not had within lock_timeout (or at once, with NOWAIT). */
export function isLockNotAvailable(err: unknown): boolean {
  return driverError(err).code === '55P03';
}

/** pg's error, whether thrown bare or wrapped by TypeORM (QueryFailedError.driverError). */
function driverError(err: unknown): { code?: unknown; where?: unknown } {
  return ((err as { driverError?: unknown } | null)?.driverError ?? err ?? {}) as { code?: unknown; where?: unknown };
}
