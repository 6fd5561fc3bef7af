import { EntityManager } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import type { Image } from '@ws/images';
import { inventoryReferencesOf, Server } from '@ws/servers';

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
  const holders = await holdingImage(tx, image, candidates);
  const usage: Array<{ server_id: string; cores: string; memory: string }> = await tx.query(
    `SELECT server_id, COALESCE(SUM(cores), 0) AS cores, COALESCE(SUM(memory), 0) AS memory
       FROM workspaces WHERE server_id = ANY($1) AND status IN ('starting', 'running', 'stopping') GROUP BY server_id`,
    [holders.map((s) => s.id)],
  );
  const used = new Map(usage.map((u) => [u.server_id, { cores: Number(u.cores), memory: Number(u.memory) }]));
  const fits = holders
    .map((s) => ({ server: s, freeCores: offeredCores(s) - (used.get(s.id)?.cores ?? 0), freeMemory: offeredMemory(s) - (used.get(s.id)?.memory ?? 0) }))
    .filter((c) => c.freeCores >= image.cores && c.freeMemory >= image.memory)
    .sort((a, b) => b.freeCores - a.freeCores || b.freeMemory - a.freeMemory);
  if (fits.length === 0) throw new ApiError(ErrorCode.NoCapacity, NO_CAPACITY_MESSAGE);
  return fits[0].server;
}

/**
 * The candidates whose engine holds a container image by their image inventory (@ws/servers' ServerInventory,
 * table server_images); a server whose inventory was never taken counts as holding it. None: 503 naming the image.
 */
export async function holdingImage(tx: EntityManager, image: Image, candidates: Server[]): Promise<Server[]> {
  if (image.kind !== 'container') return candidates;
  const inventoried = candidates.filter((s) => s.imagesCheckedAt !== null);
  if (inventoried.length === 0) return candidates;
  const rows: Array<{ server_id: string }> = await tx.query(
    'SELECT DISTINCT server_id FROM server_images WHERE server_id = ANY($1) AND reference = ANY($2)',
    [inventoried.map((s) => s.id), inventoryReferencesOf(image.name)],
  );
  const holding = new Set(rows.map((r) => r.server_id));
  const holders = candidates.filter((s) => s.imagesCheckedAt === null || holding.has(s.id));
  if (holders.length === 0) {
    throw new ApiError(ErrorCode.NoCapacity, `${NO_CAPACITY_MESSAGE} (image ${image.friendlyName}, ${image.name}, is on no reachable server that may run it; copy it with: image distribute ${image.name})`);
  }
  return holders;
}
