import type { Pool, QueryResultRow } from 'pg';
import type { DataSource, EntityMetadata } from 'typeorm';
import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata';
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

type EntityClass<T> = new () => T;

/** Per data source and entity: the select list of every column under a prefix (built once). */
const selectLists = new WeakMap<DataSource, Map<string, string>>();

/**
 * Every column of `entity` as `<alias>.<column> AS <prefix><column>`, for a raw select that `hydrate`
 * turns back into the entity. The list comes from TypeORM's metadata, so it follows the entity.
 */
export function selectColumns(db: DataSource, entity: EntityClass<object>, alias: string, prefix = ''): string {
  let lists = selectLists.get(db);
  if (!lists) selectLists.set(db, (lists = new Map()));
  const key = `${entity.name}:${alias}:${prefix}`;
  let list = lists.get(key);
  if (list === undefined) {
    list = storedColumns(db, entity).map((c) => `${alias}.${c.databaseName} AS ${prefix}${c.databaseName}`).join(', ');
    lists.set(key, list);
  }
  return list;
}

/**
 * An entity from a raw row selected with `selectColumns` (same prefix): each column converted as TypeORM
 * converts it when it loads the entity itself (driver conversion, then the column's transformer), so a hand
 * select hydrates exactly like a find. Null when the row has no primary key there (an unmatched LEFT JOIN).
 */
export function hydrate<T extends object>(db: DataSource, entity: EntityClass<T>, row: Record<string, unknown>, prefix = ''): T | null {
  const metadata = db.getMetadata(entity);
  if (metadata.primaryColumns.some((c) => row[prefix + c.databaseName] === null || row[prefix + c.databaseName] === undefined)) return null;
  const result = new entity();
  for (const column of storedColumns(db, entity)) {
    const value = row[prefix + column.databaseName];
    if (value !== undefined) column.setEntityValue(result, db.driver.prepareHydratedValue(value, column));
  }
  return result;
}

/** The entity's own columns, without virtual ones (a relation's key that has no property), as TypeORM loads them. */
function storedColumns(db: DataSource, entity: EntityClass<object>): ColumnMetadata[] {
  const metadata = db.getMetadata(entity);
  let columns = storedColumnsOf.get(metadata);
  if (!columns) storedColumnsOf.set(metadata, (columns = metadata.columns.filter((c) => !c.isVirtual)));
  return columns;
}
const storedColumnsOf = new WeakMap<EntityMetadata, ColumnMetadata[]>();
