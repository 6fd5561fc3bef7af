import type { EntityManager } from 'typeorm';
import { stagedCounts } from '@ws/workspaces';

const MAX_POOLS = 1000;

/** Each staging config's pool for the metrics: asked for (num_sessions), ready to claim, still starting. */
export async function stagingPools(db: Pick<EntityManager, 'query'>): Promise<Array<{ pool: string; desired: number; ready: number; starting: number }>> {
  const configs = (await db.query('SELECT id, num_sessions FROM staging_configs ORDER BY id LIMIT $1', [MAX_POOLS])) as Array<{ id: string; num_sessions: number }>;
  const counts = await stagedCounts(db);
  return configs.map((c) => ({ pool: c.id.replace(/-/g, ''), desired: Number(c.num_sessions), ready: counts.get(c.id)?.ready ?? 0, starting: counts.get(c.id)?.starting ?? 0 }));
}
