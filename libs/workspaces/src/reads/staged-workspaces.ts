import type { EntityManager } from 'typeorm';
import { UNASSIGNED_STAGED } from '../workspace.entity';

/** What runs a statement: the data source's manager, or a transaction's. */
export type Queryable = Pick<EntityManager, 'query'>;

/*
 * The rows of staging pools, as the staging library counts, picks, trims and hands them out. The workspaces
 * table is this library's, so its SQL lives here; staging keeps its own table (staging_configs) and decides
 * which configs match. "Unassigned staged" is UNASSIGNED_STAGED: staged and never handed to anyone.
 */

/**
 * Not on a server the health check marked down (ServerHealth): such a staged desktop is neither handed out nor
 * counted, so the pool refills elsewhere; when its host answers again the surplus is trimmed as usual.
 */
const ON_UP_HOST = `NOT EXISTS (SELECT 1 FROM servers hs WHERE hs.id = w.server_id AND hs.health = 'down')`;

/** Staged workspaces never handed to anyone that run and have not expired: what a claim can take. */
const READY = `${UNASSIGNED_STAGED} AND w.status = 'running' AND w.expiration_date > now() AND ${ON_UP_HOST}`;

/** How many ready staged workspaces each of these configs has (configs without any are absent). */
export async function countReadyStaged(db: Queryable, stagingConfigIds: string[]): Promise<Map<string, number>> {
  if (stagingConfigIds.length === 0) return new Map();
  const rows = (await db.query(
    `SELECT w.staging_config_id, count(*)::int AS ready FROM workspaces w
      WHERE w.staging_config_id = ANY($1) AND ${READY} GROUP BY w.staging_config_id`,
    [stagingConfigIds],
  )) as Array<{ staging_config_id: string; ready: number }>;
  return new Map(rows.map((r) => [r.staging_config_id, r.ready]));
}

/**
 * The oldest ready staged workspace of this image from one of these configs, locked for the claiming
 * transaction; rows another claim holds are skipped (SKIP LOCKED), so concurrent requests on any replica never
 * get the same one and never wait for each other.
 */
export async function pickReadyStaged(tx: Queryable, imageId: string, stagingConfigIds: string[]): Promise<{ id: string; shareId: string } | null> {
  if (stagingConfigIds.length === 0) return null;
  const [row] = (await tx.query(
    `SELECT w.id, w.share_id FROM workspaces w
      WHERE ${READY} AND w.image_id = $1 AND w.staging_config_id = ANY($2)
      ORDER BY w.start_date, w.id LIMIT 1 FOR UPDATE OF w SKIP LOCKED`,
    [imageId, stagingConfigIds],
  )) as Array<{ id: string; share_id: string }>;
  return row ? { id: row.id, shareId: row.share_id } : null;
}

/** A config's pool as the reconciler counts it: unexpired, on a host that answers, starting ones first, then the oldest running. */
export async function stagedPool(tx: Queryable, stagingConfigId: string): Promise<string[]> {
  const rows = (await tx.query(
    `SELECT w.id FROM workspaces w WHERE w.staging_config_id = $1 AND ${UNASSIGNED_STAGED} AND w.status IN ('starting', 'running') AND w.expiration_date > now() AND ${ON_UP_HOST}
      ORDER BY (w.status = 'running'), w.start_date, w.id`,
    [stagingConfigId],
  )) as Array<{ id: string }>;
  return rows.map((r) => r.id);
}

/** A config's unassigned staged workspaces that still hold (or may hold) a container: what its removal ends. */
export async function unassignedStaged(db: Queryable, stagingConfigId: string): Promise<string[]> {
  const rows = (await db.query(
    `SELECT w.id FROM workspaces w WHERE w.staging_config_id = $1 AND ${UNASSIGNED_STAGED} AND w.status IN ('starting', 'running', 'failed')`,
    [stagingConfigId],
  )) as Array<{ id: string }>;
  return rows.map((r) => r.id);
}

/** An unassigned staged workspace with what decides whether its pool still wants it. */
export interface StagedRow {
  id: string;
  stagingConfigId: string;
  imageId: string;
  /** The zone of its server (null when it has none). */
  zoneId: string | null;
  status: 'starting' | 'running' | 'failed';
  expired: boolean;
}

/** Every unassigned staged workspace that starts, runs or failed (of one config, or of all). */
export async function liveUnassignedStaged(db: Queryable, stagingConfigId: string | null): Promise<StagedRow[]> {
  const rows = (await db.query(
    `SELECT w.id, w.staging_config_id, w.image_id, s.zone_id, w.status, w.expiration_date <= now() AS expired
       FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id
      WHERE ${UNASSIGNED_STAGED} AND w.status IN ('starting', 'running', 'failed') AND ($1::uuid IS NULL OR w.staging_config_id = $1)`,
    [stagingConfigId],
  )) as Array<{ id: string; staging_config_id: string; image_id: string; zone_id: string | null; status: StagedRow['status']; expired: boolean }>;
  return rows.map((r) => ({ id: r.id, stagingConfigId: r.staging_config_id, imageId: r.image_id, zoneId: r.zone_id, status: r.status, expired: r.expired }));
}

/** The pool a workspace came from and whether it was handed out since (null: no such workspace). */
export async function stagingOriginOf(tx: Queryable, workspaceId: string): Promise<{ stagingConfigId: string | null; assignedAt: Date | null } | null> {
  const [row] = (await tx.query('SELECT staging_config_id, assigned_at FROM workspaces WHERE id = $1', [workspaceId])) as Array<{ staging_config_id: string | null; assigned_at: Date | null }>;
  return row ? { stagingConfigId: row.staging_config_id, assignedAt: row.assigned_at } : null;
}

/** A claimed staged workspace's owner link: the session token minted for its new user. */
export async function bindSessionToken(db: Queryable, workspaceId: string, sessionTokenId: string): Promise<void> {
  await db.query('UPDATE workspaces SET session_token_id = $1 WHERE id = $2', [sessionTokenId, workspaceId]);
}

/**
 * Live workspaces of the whole deployment, staged and failed ones included: what the license's session limit
 * counts. Inside the caller's transaction it locks the seat counter's admitted row (session_seats, kept by a
 * trigger on workspaces) until the commit, so reservations take turns there and the count stays exact; freed
 * seats are summed from their stripes unlocked (a destroy not yet committed still counts as live). Call it last
 * before inserting the workspace row: the lock is then held only for the insert and the commit.
 */
export async function countLiveWorkspaces(tx: Queryable): Promise<number> {
  const [seats] = (await tx.query('SELECT admitted FROM session_seats WHERE id = 1 FOR UPDATE')) as Array<{ admitted: string }>;
  const [freed] = (await tx.query('SELECT COALESCE(SUM(freed), 0) AS freed FROM session_seats_freed')) as Array<{ freed: string }>;
  return Number(seats.admitted) - Number(freed.freed);
}

/** A claimed staged workspace takes the client settings a cast link enforces (its container started without them). */
export async function setClientSettingsOverride(db: Queryable, workspaceId: string, override: Record<string, boolean>): Promise<void> {
  await db.query('UPDATE workspaces SET client_settings_override = $1 WHERE id = $2', [JSON.stringify(override), workspaceId]);
}
