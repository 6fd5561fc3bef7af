import { IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import type { DataSource, EntityManager } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';

/** The largest page a list answers (`limit` 1 to this). */
export const MAX_PAGE_LIMIT = 1000;
/** The page size when a request sends a `cursor` without a `limit`. */
export const DEFAULT_PAGE_LIMIT = 100;

/**
 * The request fields of a paged list: a list operation's DTO extends this (or is it). Without `limit` and
 * `cursor` the list answers as the contract has it, whole and without `next_cursor`.
 */
export class PageRequest {
  @IsOptional() @IsInt() @Min(1) @Max(MAX_PAGE_LIMIT) limit?: number;
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(1024) cursor?: string;
}

/** A key column of a list's order: its SQL expression (a trusted constant, never input) and its type. */
export interface KeysetKey {
  column: string;
  type: 'timestamptz' | 'uuid' | 'text' | 'bigint';
}

/**
 * A list in keyset order. The keys are compared as one row, ascending: `(k1, k2, …) > (cursor values)`, so the
 * last key must be unique (the id) and no key may change while a row lives (else a walk can see it twice or
 * miss it). Creation order, `[{column: 't.created_at', type: 'timestamptz'}, {column: 't.id', type: 'uuid'}]`,
 * is the usual choice: rows inserted during a walk never move the ones that existed when it began.
 */
export interface KeysetList {
  /** Names the list inside its cursors: a cursor of another list is refused (400). */
  name: string;
  /** The FROM clause (a table and its alias, joins allowed). */
  from: string;
  keys: readonly KeysetKey[];
  /** The list's own filter, with $1… placeholders for `params`. */
  where?: string;
  /** Newest first (keys compared descending), e.g. a log whose latest entries matter most. Default ascending. */
  descending?: boolean;
  params?: readonly unknown[];
}

/** A decoded page request: its size and the key values it continues after (null: from the start). */
export interface Page {
  limit: number;
  after: string[] | null;
}

/** What a paged answer adds to the contract's body: `next_cursor`, or nothing when paging was not asked for. */
export type PageAnswer = { next_cursor: string | null } | Record<string, never>;

const KEY_VALUE: Record<KeysetKey['type'], RegExp> = {
  timestamptz: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  text: /^[^\0]{0,1000}$/,
  bigint: /^-?\d{1,19}$/,
};

const invalidCursor = (why: string) => new ApiError(ErrorCode.InvalidRequest, `cursor ${why}`);

/** The page a request asks for, or null when it asks for none (no `limit`, no `cursor`). A bad cursor is a 400. */
export function pageOf(request: PageRequest, list: KeysetList): Page | null {
  if (request.limit == null && request.cursor == null) return null;
  return { limit: request.limit ?? DEFAULT_PAGE_LIMIT, after: request.cursor == null ? null : decodeCursor(request.cursor, list) };
}

/** The cursor's key values, checked against the list: its name, the number of keys and each key's form. */
export function decodeCursor(cursor: string, list: KeysetList): string[] {
  let decoded: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('not base64url');
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor('is not a cursor this service issued');
  }
  if (!Array.isArray(decoded) || decoded.length !== list.keys.length + 1 || !decoded.every((v) => typeof v === 'string')) {
    throw invalidCursor('is not a cursor this service issued');
  }
  const [name, ...values] = decoded as string[];
  if (name !== list.name) throw invalidCursor(`belongs to another list, not ${list.name}`);
  list.keys.forEach((key, i) => {
    if (!KEY_VALUE[key.type].test(values[i])) throw invalidCursor('is not a cursor this service issued');
  });
  return values;
}

export function encodeCursor(list: KeysetList, values: readonly string[]): string {
  return Buffer.from(JSON.stringify([list.name, ...values]), 'utf8').toString('base64url');
}

/** A key's value as text that casts back to the same value (timestamps in UTC with microseconds). */
function keyText(key: KeysetKey): string {
  return key.type === 'timestamptz' ? `to_char(${key.column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')` : `${key.column}::text`;
}

/**
 * One page of the list's ids (the last key's values) in keyset order, and the cursor of the next page (null
 * when this one reaches the end). One statement reading limit + 1 rows; the caller loads the rows themselves
 * by id (with whatever relations it needs) and puts them in this order with `inIdOrder`.
 */
export async function keysetPage(db: DataSource | EntityManager, list: KeysetList, page: Page): Promise<{ ids: string[]; nextCursor: string | null }> {
  const params: unknown[] = [...(list.params ?? [])];
  const conditions = list.where ? [`(${list.where})`] : [];
  if (page.after) {
    const placeholders = list.keys.map((key, i) => {
      params.push(page.after?.[i]);
      return `$${params.length}::${key.type}`;
    });
    conditions.push(`(${list.keys.map((k) => k.column).join(', ')}) ${list.descending ? '<' : '>'} (${placeholders.join(', ')})`);
  }
  params.push(page.limit + 1);
  const sql = `SELECT ${list.keys.map((key, i) => `${keyText(key)} AS k${i}`).join(', ')} FROM ${list.from}`
    + `${conditions.length ? ` WHERE ${conditions.join(' AND ')}` : ''}`
    + ` ORDER BY ${list.keys.map((k) => `${k.column} ${list.descending ? 'DESC' : 'ASC'}`).join(', ')} LIMIT $${params.length}`;
  const rows = (await db.query(sql, params)) as Array<Record<string, string>>;
  const more = rows.length > page.limit;
  const shown = more ? rows.slice(0, page.limit) : rows;
  const last = list.keys.length - 1;
  const nextCursor = more ? encodeCursor(list, list.keys.map((_, i) => shown[shown.length - 1][`k${i}`])) : null;
  return { ids: shown.map((r) => r[`k${last}`]), nextCursor };
}

/** `rows` in the order of `ids` (rows whose id is not among them are left out, ids without a row skipped). */
export function inIdOrder<T>(rows: readonly T[], ids: readonly string[], idOf: (row: T) => string = (row) => (row as { id: string }).id): T[] {
  const byId = new Map(rows.map((row) => [idOf(row), row]));
  return ids.map((id) => byId.get(id)).filter((row): row is T => row !== undefined);
}

/**
 * A list answered whole (`request` asks for no page: `loadAll`, answer unchanged) or one page of it (`loadByIds`
 * for the page's ids, in keyset order, and `next_cursor`). The usual way to page a list:
 *
 *   const { rows, paging } = await listPage(db, USERS, body, () => repo.find(...), (ids) => repo.findBy({ id: In(ids) }));
 *   return { users: rows.map(toUser), ...paging };
 */
export async function listPage<T>(
  db: DataSource | EntityManager, list: KeysetList, request: PageRequest,
  loadAll: () => Promise<T[]>, loadByIds: (ids: string[]) => Promise<T[]>, idOf?: (row: T) => string,
): Promise<{ rows: T[]; paging: PageAnswer }> {
  const page = pageOf(request, list);
  if (!page) return { rows: await loadAll(), paging: {} };
  const { ids, nextCursor } = await keysetPage(db, list, page);
  const rows = ids.length ? inIdOrder(await loadByIds(ids), ids, idOf) : [];
  return { rows, paging: { next_cursor: nextCursor } };
}

/** The usual key of a table in creation order: (created_at, id) under `alias`. */
export function creationOrder(alias: string): KeysetKey[] {
  return [{ column: `${alias}.created_at`, type: 'timestamptz' }, { column: `${alias}.id`, type: 'uuid' }];
}
