import { EntityManager } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import type { Image } from '@ws/images';
import { Server } from '@ws/servers';

export const NO_CAPACITY_MESSAGE = 'No resources are available to create the requested workspace. Please try again later or request fewer resources.';

/** Where a workspace must be placed beyond its image's restrictions (a staged workspace: its config's zone). */
export interface PlacementConstraints {
  zoneId?: string;
}

/** Servers an image may run on, by its zone and server restrictions and the caller's constraints. */
function eligible(servers: Server[], image: Image, constraints: PlacementConstraints): Server[] {
  return servers.filter(
    (s) => s.enabled && (!image.restrictToZone || s.zoneId === image.zoneId) && (!image.restrictToServer || s.id === image.serverId) && (!constraints.zoneId || s.zoneId === constraints.zoneId),
  );
}

/** What a server offers to placement: its cores and memory times its overcommit factors (README "Capacity"). */
export const offeredCores = (s: Pick<Server, 'cores' | 'cpuOvercommit'>) => s.cores * (s.cpuOvercommit ?? 1);
export const offeredMemory = (s: Pick<Server, 'memory' | 'memoryOvercommit'>) => Math.floor(s.memory * (s.memoryOvercommit ?? 1));

/**
 * Picks the eligible server with the most free cores (after overcommit) that fits the image, inside the caller's transaction.
 * Every server row is locked (FOR UPDATE, in id order: no deadlocks) so concurrent requests cannot both
 * take the last slot; the caller inserts the workspace before committing.
 */
export async function reserveServer(tx: EntityManager, image: Image, constraints: PlacementConstraints = {}): Promise<Server> {
  const servers = await tx.getRepository(Server).createQueryBuilder('s').setLock('pessimistic_write').orderBy('s.id').getMany();
  const allowed = eligible(servers, image, constraints);
  if (allowed.length === 0) throw new ApiError(ErrorCode.NoCapacity, `${NO_CAPACITY_MESSAGE} (no server can run image ${image.friendlyName})`);
  // A server the health check marked down gets nothing new (ServerHealth); its own workspaces stay.
  const candidates = allowed.filter((s) => s.health !== 'down');
  if (candidates.length === 0) throw new ApiError(ErrorCode.NoCapacity, `${NO_CAPACITY_MESSAGE} (every server that can run image ${image.friendlyName} is unreachable)`);
  const usage: Array<{ server_id: string; cores: string; memory: string }> = await tx.query(
    `SELECT server_id, COALESCE(SUM(cores), 0) AS cores, COALESCE(SUM(memory), 0) AS memory
       FROM workspaces WHERE server_id = ANY($1) AND status IN ('starting', 'running', 'stopping') GROUP BY server_id`,
    [candidates.map((s) => s.id)],
  );
  const used = new Map(usage.map((u) => [u.server_id, { cores: Number(u.cores), memory: Number(u.memory) }]));
  const fits = candidates
    .map((s) => ({ server: s, freeCores: offeredCores(s) - (used.get(s.id)?.cores ?? 0), freeMemory: offeredMemory(s) - (used.get(s.id)?.memory ?? 0) }))
    .filter((c) => c.freeCores >= image.cores && c.freeMemory >= image.memory)
    .sort((a, b) => b.freeCores - a.freeCores || b.freeMemory - a.freeMemory);
  if (fits.length === 0) throw new ApiError(ErrorCode.NoCapacity, NO_CAPACITY_MESSAGE);
  return fits[0].server;
}
