import { LIVE_STATUSES, UNASSIGNED_STAGED } from '../workspace.entity';
import type { Queryable } from './staged-workspaces';

/** Bounds of the scrape-time reads: a fleet past these shows its first rows only. */
const MAX_SERVERS = 1000;
const MAX_POOLS = 1000;

export interface ServerFigures {
  server: string;
  enabled: boolean;
  /** The server's last health check answered (issue 24); a server never checked counts as up. */
  up: boolean;
  offeredCores: number;
  offeredMemory: number;
  usedCores: number;
  usedMemory: number;
}

/** Workspaces that are not deleted, by status and server hostname ('' for none): one grouped, index-backed select. */
export async function workspacesByStatusAndServer(db: Queryable): Promise<Array<{ status: string; server: string; count: number }>> {
  const rows = (await db.query(
    `SELECT w.status, COALESCE(s.hostname, '') AS server, count(*)::int AS count
       FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id
      WHERE w.status = ANY($1) GROUP BY w.status, s.hostname ORDER BY 2, 1 LIMIT $2`,
    [LIVE_STATUSES, MAX_SERVERS * LIVE_STATUSES.length],
  )) as Array<{ status: string; server: string; count: number }>;
  return rows;
}

/** Each server's offered capacity (cores and memory times their overcommit) and what live workspaces reserve of it. */
export async function serverCapacity(db: Queryable): Promise<ServerFigures[]> {
  const rows = (await db.query(
    `SELECT s.hostname, s.enabled, s.health = 'up' AS up, s.cores * s.cpu_overcommit AS offered_cores, floor(s.memory * s.memory_overcommit) AS offered_memory,
            COALESCE(u.cores, 0) AS used_cores, COALESCE(u.memory, 0) AS used_memory
       FROM servers s LEFT JOIN (
         SELECT server_id, SUM(cores) AS cores, SUM(memory) AS memory FROM workspaces
          WHERE status IN ('starting', 'running', 'stopping') AND server_id IS NOT NULL GROUP BY server_id
       ) u ON u.server_id = s.id
      ORDER BY s.hostname LIMIT $1`,
    [MAX_SERVERS],
  )) as Array<{ hostname: string; enabled: boolean; up: boolean; offered_cores: string; offered_memory: string; used_cores: string; used_memory: string }>;
  return rows.map((r) => ({
    server: r.hostname, enabled: r.enabled, up: r.up, offeredCores: Number(r.offered_cores), offeredMemory: Number(r.offered_memory), usedCores: Number(r.used_cores), usedMemory: Number(r.used_memory),
  }));
}

/** Unassigned staged workspaces per staging config: running and unexpired (claimable), and starting. */
export async function stagedCounts(db: Queryable): Promise<Map<string, { ready: number; starting: number }>> {
  const rows = (await db.query(
    `SELECT w.staging_config_id,
            count(*) FILTER (WHERE w.status = 'running' AND w.expiration_date > now())::int AS ready,
            count(*) FILTER (WHERE w.status = 'starting')::int AS starting
       FROM workspaces w WHERE ${UNASSIGNED_STAGED} AND w.status IN ('starting', 'running')
      GROUP BY w.staging_config_id LIMIT $1`,
    [MAX_POOLS],
  )) as Array<{ staging_config_id: string; ready: number; starting: number }>;
  return new Map(rows.map((r) => [r.staging_config_id, { ready: r.ready, starting: r.starting }]));
}

/** Network holders per server hostname: free (claimable) and claimed by a workspace (network-holders.ts). */
export async function networkHolderCounts(db: Queryable): Promise<Array<{ server: string; free: number; claimed: number }>> {
  return (await db.query(
    `SELECT s.hostname AS server, count(*) FILTER (WHERE h.workspace_id IS NULL)::int AS free, count(*) FILTER (WHERE h.workspace_id IS NOT NULL)::int AS claimed
       FROM network_holders h JOIN servers s ON s.id = h.server_id GROUP BY s.hostname ORDER BY 1 LIMIT $1`,
    [MAX_SERVERS],
  )) as Array<{ server: string; free: number; claimed: number }>;
}
