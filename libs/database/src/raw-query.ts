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
export function rawQuery<T extends QueryResultRow>(db: DataSource, sql: string, params: unknown[] = []): Promise<T[]> {
  const pool = (db.driver as PostgresDriver).master as Pool;
  // One `then`, not an async function's await: a promise less per query on every request's path.
  return pool.query<T>(sql, params).then((result) => result.rows);
}

type EntityClass<T> = new () => T;

/** Per data source: what `make` builds for `key` (from the entity metadata, which a data source never changes), built once. */
export function builtOnce<V>(cache: WeakMap<DataSource, Map<string, V>>, db: DataSource, key: string, make: () => V): V {
  let built = cache.get(db);
  if (!built) cache.set(db, (built = new Map()));
  let value = built.get(key);
  if (value === undefined) built.set(key, (value = make()));
  return value;
}

const selectLists = new WeakMap<DataSource, Map<string, string>>();

/**
 * Every column of `entity` (or only those of `properties`, for a read that needs a few) as
 * `<alias>.<column> AS <prefix><column>`, for a raw select that `hydrate` turns back into the entity. The list
 * comes from TypeORM's metadata, so it follows the entity.
 */
export function selectColumns<T extends object>(db: DataSource, entity: EntityClass<T>, alias: string, prefix = '', properties?: ReadonlyArray<keyof T & string>): string {
  return builtOnce(selectLists, db, `${entity.name}:${alias}:${prefix}:${properties?.join(',') ?? '*'}`, () => {
    const columns = storedColumns(db, entity).filter((c) => !properties || properties.includes(c.propertyName as keyof T & string));
    if (properties && columns.length !== properties.length) throw new Error(`${entity.name} has no column for some of ${properties.join(', ')}`);
    return columns.map((c) => `${alias}.${c.databaseName} AS ${prefix}${c.databaseName}`).join(', ');
  });
}

/**
 * An entity from a raw row selected with `selectColumns` (same prefix): each column converted as TypeORM
 * converts it when it loads the entity itself (driver conversion, then the column's transformer), so a hand
 * select hydrates exactly like a find. Null when the row has no primary key there (an unmatched LEFT JOIN).
 */
export function hydrate<T extends object>(db: DataSource, entity: EntityClass<T>, row: Record<string, unknown>, prefix = ''): T | null {
  return (builtOnce(hydrators, db, `${entity.name}:${prefix}`, () => planHydrator(db, entity, prefix)) as Hydrator<T>)(row);
}

/**
 * String column types whose values PostgresDriver.prepareHydratedValue changes (typeorm 0.3: dates and times,
 * enums, vectors, hstore, the simple-* types, cube). Every other string type it returns as pg parsed it.
 */
const CONVERTED_TYPES = new Set([
  'datetime', 'timestamp', 'timestamp with time zone', 'timestamp without time zone', 'date', 'time', 'vector', 'halfvec', 'hstore',
  'simple-array', 'simple-json', 'cube', 'enum', 'simple-enum',
]);

type Hydrator<T> = (row: Record<string, unknown>) => T | null;
const hydrators = new WeakMap<DataSource, Map<string, Hydrator<object>>>();

/**
 * `hydrate`'s work for one entity and prefix, planned once: the reads of every request hydrate a few hundred
 * columns, and asking the driver column by column which conversion applies cost as much as the rest of the mapping.
 * A column the driver would return unchanged (a plain string type, no transformer, not embedded) is copied;
 * every other one still goes through the driver and its transformer, exactly as TypeORM does it.
 */
function planHydrator<T extends object>(db: DataSource, entity: EntityClass<T>, prefix: string): Hydrator<T> {
  const keys = db.getMetadata(entity).primaryColumns.map((c) => prefix + c.databaseName);
  const columns = storedColumns(db, entity).map((column) => ({
    key: prefix + column.databaseName,
    property: column.propertyName,
    column,
    copied: !column.transformer && !column.embeddedMetadata && typeof column.type === 'string' && !CONVERTED_TYPES.has(column.type),
  }));
  const driver = db.driver;
  return (row) => {
    for (const key of keys) if (row[key] === null || row[key] === undefined) return null;
    const result = new entity() as Record<string, unknown>;
    for (const { key, property, column, copied } of columns) {
      const value = row[key];
      if (value === undefined) continue;
      if (copied) result[property] = value;
      else column.setEntityValue(result, driver.prepareHydratedValue(value, column));
    }
    return result as T;
  };
}

/** The entity's own columns, without virtual ones (a relation's key that has no property), as TypeORM loads them. */
function storedColumns(db: DataSource, entity: EntityClass<object>): ColumnMetadata[] {
  const metadata = db.getMetadata(entity);
  let columns = storedColumnsOf.get(metadata);
  if (!columns) storedColumnsOf.set(metadata, (columns = metadata.columns.filter((c) => !c.isVirtual)));
  return columns;
}
const storedColumnsOf = new WeakMap<EntityMetadata, ColumnMetadata[]>();
