import { DataSource, EntityManager, Repository } from 'typeorm';
import { ApiError, parseId } from '@ws/common';
import { builtOnce, hydrate, rawQuery, selectColumns } from '@ws/database';
import { Image, ImageAttribute } from '@ws/images';
import { Server } from '@ws/servers';
import { User } from '@ws/users';
import { LIVE_STATUSES, Workspace } from '../workspace.entity';
import { MAPPED_IMAGE_FIELDS, MAPPED_SERVER_FIELDS, MAPPED_WORKSPACE_FIELDS, type MappedImage, type MappedWorkspace } from './workspace.mappers';

export type WorkspaceTarget = { workspaceId: string } | { shareId: string };

const SHARE_ID = /^[0-9a-f]{32}$/;

/** A live workspace with its image (and attributes) and server, by id (either layout) or share id; 400 `Invalid …` otherwise. */
export async function findLiveWorkspace(workspaces: Repository<Workspace>, target: WorkspaceTarget): Promise<Workspace> {
  return findLive(workspaces, target);
}

/**
 * findLiveWorkspace for get_workspace_status, which shows of the image only what the wire shows (the polled call:
 * the image's JSON documents are the costliest columns of the row to parse). The server is whole: the container
 * check asks its Docker host.
 */
export async function findLiveWorkspaceStatus(workspaces: Repository<Workspace>, workspaceId: string): Promise<StatusWorkspace> {
  return findLive(workspaces, { workspaceId }, MAPPED_IMAGE_FIELDS);
}

export type StatusWorkspace = Omit<Workspace, 'image'> & { image?: MappedImage | null };

async function findLive(workspaces: Repository<Workspace>, target: WorkspaceTarget, imageFields?: ReadonlyArray<keyof Image & string>): Promise<Workspace> {
  if ('shareId' in target) {
    const workspace = SHARE_ID.test(target.shareId) ? await loadLive(workspaces, 'share_id', target.shareId, imageFields) : null;
    if (!workspace) throw ApiError.invalidId('share_id', target.shareId);
    return workspace;
  }
  const id = parseId(target.workspaceId);
  const workspace = id ? await loadLive(workspaces, 'id', id, imageFields) : null;
  if (!workspace) throw ApiError.invalidId('workspace_id', target.workspaceId);
  return workspace;
}

/**
 * Every live workspace (oldest first) with its owner's username, and of it, its image (with attributes) and its
 * server the fields the wire shows: get_workspaces. With `ids`, only those (a page's). Only those fields are
 * selected: the other columns (JSON documents, timestamps) cost more to parse and hydrate than the rest of the row.
 */
export async function findAllLive(workspaces: Repository<Workspace>, ids?: string[]): Promise<Array<{ workspace: MappedWorkspace; username: string | null }>> {
  const db = workspaces.manager.connection;
  const sql = builtOnce(statements, db, ids ? 'list:ids' : 'list', () =>
    `SELECT ${selectColumns(db, Workspace, 'w', 'w_', MAPPED_WORKSPACE_FIELDS)}, ${selectColumns(db, Image, 'i', 'i_', MAPPED_IMAGE_FIELDS)}, ${selectColumns(db, ImageAttribute, 'a', 'a_')},
            ${selectColumns(db, Server, 's', 's_', MAPPED_SERVER_FIELDS)}, u.username AS u_username
       FROM workspaces w LEFT JOIN images i ON i.id = w.image_id LEFT JOIN image_attributes a ON a.image_id = i.id
       LEFT JOIN servers s ON s.id = w.server_id LEFT JOIN users u ON u.id = w.user_id
      WHERE w.status = ANY($1)${ids ? ' AND w.id = ANY($2::uuid[])' : ''} ORDER BY w.start_date ASC, w.id ASC`);
  const rows = await rawQuery(db, sql, ids ? [LIVE_STATUSES, ids] : [LIVE_STATUSES]);
  const found: Array<{ workspace: MappedWorkspace; username: string | null }> = [];
  let last: MappedWorkspace | null = null;
  for (const row of rows) {
    if (last === null || last.id !== row.w_id) {
      last = withRelations(db, row);
      found.push({ workspace: last, username: (row.u_username as string | null) ?? null });
    }
    const attribute = hydrate(db, ImageAttribute, row, 'a_');
    if (attribute) last.image?.attributes?.push(attribute);
  }
  return found;
}

/**
 * One raw select (a row per image attribute) hydrated as TypeORM's find with those relations would: this
 * lookup starts most workspace operations, and TypeORM's find with relations costs two statements (a
 * DISTINCT pass, then the joins) and several times their CPU in query building and hydration.
 */
async function loadLive(workspaces: Repository<Workspace>, column: 'id' | 'share_id', value: string, imageFields?: ReadonlyArray<keyof Image & string>): Promise<Workspace | null> {
  return loadWithRelations(workspaces.manager.connection, `w.${column} = $1 AND w.status = ANY($2)`, [value, LIVE_STATUSES], { imageFields });
}

/**
 * A workspace by id, in any state, with its image (and attributes), server and user: what a provision run starts
 * from. One raw select, as loadLive, instead of TypeORM's find with three relations, on every launch's path.
 */
export async function findWorkspaceToProvision(workspaces: Repository<Workspace>, workspaceId: string): Promise<Workspace | null> {
  return loadWithRelations(workspaces.manager.connection, 'w.id = $1', [workspaceId], { withUser: true });
}

async function loadWithRelations(
  db: DataSource, where: string, params: unknown[], options: { imageFields?: ReadonlyArray<keyof Image & string>; withUser?: boolean },
): Promise<Workspace | null> {
  const sql = builtOnce(statements, db, `one:${where}:${options.imageFields?.join(',') ?? '*'}:${options.withUser ? 'user' : ''}`, () => {
    const user = options.withUser ? { select: `, ${selectColumns(db, User, 'u', 'u_')}`, join: ' LEFT JOIN users u ON u.id = w.user_id' } : { select: '', join: '' };
    return `SELECT ${selectColumns(db, Workspace, 'w', 'w_')}, ${selectColumns(db, Image, 'i', 'i_', options.imageFields)}, ${selectColumns(db, ImageAttribute, 'a', 'a_')}, ${selectColumns(db, Server, 's', 's_')}${user.select}
       FROM workspaces w LEFT JOIN images i ON i.id = w.image_id LEFT JOIN image_attributes a ON a.image_id = i.id LEFT JOIN servers s ON s.id = w.server_id${user.join}
      WHERE ${where}`;
  });
  const rows = await rawQuery(db, sql, params);
  if (rows.length === 0) return null;
  const workspace = withRelations(db, rows[0]);
  if (options.withUser) workspace.user = hydrate(db, User, rows[0], 'u_');
  for (const row of rows) {
    const attribute = hydrate(db, ImageAttribute, row, 'a_');
    if (attribute) workspace.image?.attributes?.push(attribute);
  }
  return workspace;
}

/** The lookups' statements, made once per data source (they depend only on the entities' metadata). */
const statements = new WeakMap<DataSource, Map<string, string>>();

/** The workspace, its image (attributes still to add) and its server from one row; a missing relation is null, as TypeORM leaves it. */
function withRelations(db: DataSource, row: Record<string, unknown>): Workspace {
  const workspace = hydrate(db, Workspace, row, 'w_') as Workspace;
  const image = hydrate(db, Image, row, 'i_');
  if (image) image.attributes = [];
  workspace.image = image as Image;
  workspace.server = hydrate(db, Server, row, 's_');
  return workspace;
}

/** Which of these workspace ids exist, in any state (history included). */
export async function existingWorkspaceIds(db: Pick<EntityManager, 'query'>, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = (await db.query('SELECT id FROM workspaces WHERE id = ANY($1::uuid[])', [ids])) as Array<{ id: string }>;
  return new Set(rows.map((r) => r.id));
}

/** The user's most recently started running workspace of this image (a cast link's resume), or null. */
export async function latestRunningWorkspace(db: Pick<EntityManager, 'getRepository'>, userId: string, imageId: string): Promise<Workspace | null> {
  return db.getRepository(Workspace).findOne({ where: { userId, imageId, status: 'running' }, order: { startDate: 'DESC' } });
}
