import { QueryFailedError } from 'typeorm';
import { isLockNotAvailable, isLockWaitTimeout } from './lock-waits';

const pgError = (fields: Record<string, unknown>) => Object.assign(new Error('canceling statement due to statement timeout'), fields);

describe('isLockWaitTimeout', () => {
  it('is a statement cancelled while waiting for a row lock, as pg raises it or wrapped by TypeORM', () => {
    const locking = pgError({ code: '57014', where: 'while locking tuple (0,1) in relation "servers"' });
    expect(isLockWaitTimeout(locking)).toBe(true);
    expect(isLockWaitTimeout(new QueryFailedError('SELECT', [], locking))).toBe(true);
    expect(isLockWaitTimeout(pgError({ code: '57014', where: 'while updating tuple (0,1) in relation "session_seats"\nPL/pgSQL function session_seats_track()' }))).toBe(true);
    expect(isLockWaitTimeout(pgError({ code: '55P03' }))).toBe(true);
  });

  it('is a statement that only waited for an advisory lock (a launch queued for its server), which pg gives no context', () => {
    const cancelled = pgError({ code: '57014' });
    expect(isLockWaitTimeout(new QueryFailedError("SELECT pg_advisory_xact_lock(hashtextextended('ws_placement:' || $1::text, 0)) IS NOT NULL AS locked", [], cancelled))).toBe(true);
    expect(isLockWaitTimeout(new QueryFailedError('SELECT pg_sleep(10), pg_advisory_xact_lock(1)', [], cancelled))).toBe(false);
    expect(isLockWaitTimeout(new QueryFailedError('SELECT pg_try_advisory_xact_lock(1)', [], cancelled))).toBe(false);
  });

  it('is not any other cancelled statement or error (a slow or stalled server stays an outage)', () => {
    expect(isLockWaitTimeout(pgError({ code: '57014' }))).toBe(false);
    expect(isLockWaitTimeout(pgError({ code: '57014', where: 'SQL statement "SELECT pg_sleep(10)"' }))).toBe(false);
    expect(isLockWaitTimeout(pgError({ code: '23505', where: 'while locking tuple (0,1)' }))).toBe(false);
    expect(isLockWaitTimeout(new Error('Connection terminated'))).toBe(false);
    expect(isLockWaitTimeout(null)).toBe(false);
  });
});

describe('isLockNotAvailable', () => {
  it('is lock_not_available only (a lock_timeout or NOWAIT), bare or wrapped; not a cancelled wait', () => {
    expect(isLockNotAvailable(pgError({ code: '55P03' }))).toBe(true);
    expect(isLockNotAvailable(new QueryFailedError('SELECT', [], pgError({ code: '55P03' })))).toBe(true);
    expect(isLockNotAvailable(pgError({ code: '57014', where: 'while locking tuple (0,1)' }))).toBe(false);
    expect(isLockNotAvailable(undefined)).toBe(false);
  });
});
