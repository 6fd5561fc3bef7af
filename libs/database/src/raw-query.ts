import type { Pool, QueryResultRow } from 'pg';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/**
 * Runs one statement on the data source's own pg pool, without TypeORM's query runner. For the hot reads of
 * every request (a user, their groups, live workspaces): making a runner, broadcasting query events and
 * wrapping the result cost about as much CPU as the statement itself. The pool is the same, so the bounds are
 * too (connect and statement timeouts; connect failures marked as PostgreSQL's); a failed statement rejects
 * with pg's own error, which the exception filter classifies as it does TypeORM's QueryFailedError.
 */
export async function rawQuery<T extends QueryResultRow>(db: DataSource, sql: string, params: unknown[] = []): Promise<T[]> {
  const pool = (db.driver as PostgresDriver).master as Pool;
  return (await pool.query<T>(sql, params)).rows;
}
