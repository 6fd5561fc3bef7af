import { EntityManager } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import type { Image } from '@ws/images';
import { isLockNotAvailable } from '@ws/database';
import { inventoryReferencesOf, PLACEMENT_LOCK_KEY_SQL, Server } from '@ws/servers';

export const NO_CAPACITY_MESSAGE = 'No resources are available to create the requested workspace. Please try again later or request fewer resources.';

/** Where a workspace must be placed beyond its image's restrictions (a staged workspace: its config's zone). */
export interface PlacementConstraints {
  zoneId?: string;
}

/** One condition a server must meet to be offered an image; eligibility is all of them (add one to filter more). */
export type PlacementPredicate = (server: Server, image: Image, constraints: PlacementConstraints) => boolean;

/** Servers an image may run on at all: enabled, in its zone or on its server when it is restricted, in the caller's zone. */
export const placementPredicates: readonly PlacementPredicate[] = [
  (s) => s.enabled,
  (s, image) => !image.restrictToZone || s.zoneId === image.zoneId,
  (s, image) => !image.restrictToServer || s.id === image.serverId,
  (s, _image, constraints) => !constraints.zoneId || s.zoneId === constraints.zoneId,
];

export function isEligible(server: Server, image: Image, constraints: PlacementConstraints): boolean {
  return placementPredicates.every((p) => p(server, image, constraints));
}

/** A server the health check marked down gets nothing new (ServerHealth); its own workspaces stay. */
export const isUp = (s: Pick<Server, 'health'>) => s.health !== 'down';

/** What a server offers to placement: its cores and memory times its overcommit factors (README "Capacity"). */
export const offeredCores = (s: Pick<Server, 'cores' | 'cpuOvercommit'>) => s.cores * (s.cpuOvercommit ?? 1);
export const offeredMemory = (s: Pick<Server, 'memory' | 'memoryOvercommit'>) => Math.floor(s.memory * (s.memoryOvercommit ?? 1));

export interface Allocated {
  cores: number;
  memory: number;
}

/** Cores and memory held on each server by its workspaces that hold resources (starting, running, stopping). */
async function allocatedOn(tx: EntityManager, serverIds: string[]): Promise<Map<string, Allocated>> {
  const rows: Array<{ server_id: string; cores: string; memory: string }> = await tx.query(
    `SELECT server_id, COALESCE(SUM(cores), 0) AS cores, COALESCE(SUM(memory), 0) AS memory
       FROM workspaces WHERE server_id = ANY($1) AND status IN ('starting', 'running', 'stopping') GROUP BY server_id`,
    [serverIds],
  );
  return new Map(rows.map((u) => [u.server_id, { cores: Number(u.cores), memory: Number(u.memory) }]));
}

const fits = (s: Server, used: Allocated | undefined, image: Image) =>
  offeredCores(s) - (used?.cores ?? 0) >= image.cores && offeredMemory(s) - (used?.memory ?? 0) >= image.memory;

/** What is left on a server: placement spreads load by taking the one with the most free cores (then memory) first. */
const free = (s: Server, used: Allocated | undefined) => ({
  cores: offeredCores(s) - (used?.cores ?? 0),
  memory: offeredMemory(s) - (used?.memory ?? 0),
});

/** Orders rooms the most free cores, then memory, first: negative when `a` has more room than `b`, 0 when equal. */
const mostRoomFirst = (a: Allocated, b: Allocated) => b.cores - a.cores || b.memory - a.memory;

/**
 * Picks an eligible, up server with room for the image, least allocated first (the most free cores, then memory,
 * after overcommit: a larger host takes proportionally more; ties in turn), inside the caller's transaction,
 * and holds only that server's placement lock (PLACEMENT_LOCK_KEY_SQL: not the row, which health rounds and
 * operators update) until the caller commits the workspace row it inserts: concurrent
 * launches on different servers do not wait for each other, and two launches on one server cannot both take its
 * last slot, because its free capacity is read again under its lock (every placement on a server holds that
 * server's lock from this read to its commit). planPlacement and lockPlacedServer apart: see there.
 */
export async function reserveServer(tx: EntityManager, image: Image, constraints: PlacementConstraints = {}): Promise<Server> {
  return lockPlacedServer(tx, await planPlacement(tx, image, constraints));
}

/** Placement's candidates, read without any lock; what lockPlacedServer orders by room and takes one of. */
export interface PlacementPlan {
  image: Image;
  constraints: PlacementConstraints;
  candidates: Server[];
}

/**
 * The first half of placement, with no lock: the eligible, up servers that hold the image. Its refusals (no server
 * may run the image, all are down, the image is on none) come from here, so a
 * caller may plan before its transaction and take the lock (lockPlacedServer) last, just before its insert: the
 * server's lock is then held only for the insert and the commit, not for the reads and reservations before them.
 */
export async function planPlacement(db: EntityManager, image: Image, constraints: PlacementConstraints = {}): Promise<PlacementPlan> {
  const servers = await db.getRepository(Server).find();
  const allowed = servers.filter((s) => isEligible(s, image, constraints));
  if (allowed.length === 0) throw new ApiError(ErrorCode.NoCapacity, `${NO_CAPACITY_MESSAGE} (no server can run image ${image.friendlyName})`);
  const candidates = allowed.filter(isUp);
  if (candidates.length === 0) throw new ApiError(ErrorCode.NoCapacity, `${NO_CAPACITY_MESSAGE} (every server that can run image ${image.friendlyName} is unreachable)`);
  return { image, constraints, candidates: await holdingImage(db, image, candidates) };
}

/**
 * The servers with room for the image, the most free cores (then memory) first, read now. Servers with the same room
 * are taken in turn: each launch draws a ticket in lockPlacedServer (from a sequence, seen by every transaction at
 * once, unlike the workspaces that launches in flight have not committed yet) and starts the tied group at it. A burst whose launches
 * all read the same allocation is then dealt out evenly instead of by coin toss (16 at once on two hosts were split
 * 11/5 at random).
 */
async function leastAllocatedFirst(db: EntityManager, servers: Server[], image: Image, ticket: number): Promise<Server[]> {
  const used = await allocatedOn(db, servers.map((s) => s.id));
  return byRoom(servers.filter((s) => fits(s, used.get(s.id), image)).map((s) => ({ server: s, room: free(s, used.get(s.id)) })), ticket);
}

/** Servers by room, the most free cores then memory first; each group with equal room rotated by `ticket` (ids order it before). */
export function byRoom(candidates: Array<{ server: Server; room: Allocated }>, ticket: number): Server[] {
  const sorted = [...candidates].sort((a, b) => mostRoomFirst(a.room, b.room) || (a.server.id < b.server.id ? -1 : a.server.id > b.server.id ? 1 : 0));
  const ordered: Server[] = [];
  for (let start = 0; start < sorted.length; ) {
    let end = start + 1;
    while (end < sorted.length && mostRoomFirst(sorted[end].room, sorted[start].room) === 0) end++;
    const group = sorted.slice(start, end).map((c) => c.server);
    const turn = ticket % group.length;
    ordered.push(...group.slice(turn), ...group.slice(0, turn));
    start = end;
  }
  return ordered;
}

/** How long a placement waits at once for a server another launch holds, before it reads everyone's room again. */
export const LOCK_WAIT_SLICE_MS = 25;
/** Short slices first; then each slice is twice as long as the one before, up to LOCK_WAIT_SLICE_MAX_MS. */
export const LOCK_WAIT_SLICES = 40;
export const LOCK_WAIT_SLICE_MAX_MS = 200;
/**
 * How long a placement keeps re-reading the room between slices, from its first read, before it waits for each held
 * server in turn (bounded then by the transaction's statement timeout): the answer stays exact, never a false 503.
 */
export const LOCK_REBALANCE_MS = 10_000;

/** The n-th slice's length: LOCK_WAIT_SLICE_MS for the first LOCK_WAIT_SLICES, then doubling up to the cap. */
export function lockWaitSliceMs(slice: number): number {
  if (slice < LOCK_WAIT_SLICES) return LOCK_WAIT_SLICE_MS;
  return Math.min(LOCK_WAIT_SLICE_MAX_MS, LOCK_WAIT_SLICE_MS * 2 ** (slice - LOCK_WAIT_SLICES + 1));
}

/**
 * The second half, inside the caller's transaction: orders the planned servers by their room as allocated now
 * (least allocated first: launches committed since the plan count) and locks the first that still fits under its
 * lock. Candidates are tried without waiting, in order; one that no longer fits under its lock is let go at once
 * (a savepoint rolled back), so a transaction holds at most one server lock. When every candidate with room is held
 * by another launch (each holds its server's lock from this step to its commit), it waits for the first for a slice
 * (lockWaitSliceMs), then reads the room again and starts over: a queue that formed on one server while another
 * freed up moves over, where waiting on the first server to the end had sent a burst of 16 over two hosts 11/5. The
 * slices grow, so a long queue (a loaded machine) keeps rebalancing without spinning; only after LOCK_REBALANCE_MS
 * does it wait for each held server in turn (a burst that queued past the short slices had gone 7/5/4 over three).
 */
export async function lockPlacedServer(tx: EntityManager, plan: PlacementPlan): Promise<Server> {
  const { image, constraints } = plan;
  // One ticket per launch: every slice deals the same launch the same turn among servers with equal room.
  const [{ ticket }]: Array<{ ticket: string }> = await tx.query("SELECT nextval('placement_tickets') AS ticket");
  const rebalanceUntil = Date.now() + LOCK_REBALANCE_MS;
  for (let slice = 0; ; slice++) {
    const held: Server[] = [];
    for (const server of await leastAllocatedFirst(tx, plan.candidates, image, Number(ticket))) {
      const outcome = await tryServer(tx, server.id, image, constraints, 'skip');
      if (outcome === 'locked') held.push(server);
      else if (outcome) return outcome;
    }
    if (held.length === 0) break;
    if (Date.now() < rebalanceUntil) {
      // Kept only if it still has the most room once the wait is over (rivals): the launches it waited behind have
      // committed meanwhile, and a queue that all waited on one server would otherwise take it in a row.
      const outcome = await tryServer(tx, held[0].id, image, constraints, lockWaitSliceMs(slice), plan.candidates);
      if (outcome && outcome !== 'locked') return outcome;
      continue;
    }
    for (const server of held) {
      const outcome = await tryServer(tx, server.id, image, constraints, 'wait');
      if (outcome && outcome !== 'locked') return outcome;
    }
    break;
  }
  throw new ApiError(ErrorCode.NoCapacity, NO_CAPACITY_MESSAGE);
}

/**
 * Takes one server's placement lock, reads the server and its allocation again under it, and keeps the lock only
 * when the image still fits (and, given `rivals`, no rival it fits on has more room now): the server. Otherwise the
 * lock is released (savepoint rolled back) and the answer is 'locked' (another launch holds it: at once with 'skip',
 * after `wait` milliseconds with a number; or a rival has more room now) or null (no longer eligible, or full).
 * 'wait' waits as long as the transaction's own bounds allow.
 */
async function tryServer(tx: EntityManager, serverId: string, image: Image, constraints: PlacementConstraints, wait: 'skip' | 'wait' | number, rivals?: Server[]): Promise<Server | 'locked' | null> {
  await tx.query('SAVEPOINT ws_placement');
  try {
    // A slice: lock_timeout for this statement only (put back right after; a rollback to the savepoint undoes it too).
    const previous = typeof wait === 'number'
      ? ((await tx.query("SELECT current_setting('lock_timeout') AS previous, set_config('lock_timeout', $1, true)", [`${wait}ms`])) as Array<{ previous: string }>)[0].previous
      : null;
    const [{ locked }] = (await tx.query(
      wait === 'skip' ? `SELECT pg_try_advisory_xact_lock(${PLACEMENT_LOCK_KEY_SQL}) AS locked` : `SELECT pg_advisory_xact_lock(${PLACEMENT_LOCK_KEY_SQL}) IS NOT NULL AS locked`,
      [serverId],
    )) as Array<{ locked: boolean }>;
    if (previous !== null) await tx.query("SELECT set_config('lock_timeout', $1, true)", [previous]);
    // Not taken (skip only): another launch holds the server. Taken but no row: the server is gone.
    const server = locked ? await tx.getRepository(Server).findOneBy({ id: serverId }) : null;
    if (!server) {
      await tx.query('ROLLBACK TO SAVEPOINT ws_placement');
      await tx.query('RELEASE SAVEPOINT ws_placement');
      return locked ? null : 'locked';
    }
    const used = await allocatedOn(tx, [server.id, ...(rivals ?? []).map((r) => r.id)]);
    const fitting = isEligible(server, image, constraints) && isUp(server) && fits(server, used.get(server.id), image);
    const room = free(server, used.get(server.id));
    const leading = !rivals || rivals.every((r) => r.id === server.id || !fits(r, used.get(r.id), image) || mostRoomFirst(free(r, used.get(r.id)), room) >= 0);
    if (fitting && leading) {
      await tx.query('RELEASE SAVEPOINT ws_placement');
      return server;
    }
    await tx.query('ROLLBACK TO SAVEPOINT ws_placement');
    await tx.query('RELEASE SAVEPOINT ws_placement');
    return fitting ? 'locked' : null;
  } catch (err) {
    await tx.query('ROLLBACK TO SAVEPOINT ws_placement').catch(() => undefined);
    if (typeof wait === 'number' && isLockNotAvailable(err)) {
      await tx.query('RELEASE SAVEPOINT ws_placement');
      return 'locked';
    }
    throw err;
  }
}

/**
 * The candidates whose engine holds a container image by their image inventory (@ws/servers' ServerInventory,
 * table server_images). An inventory vouches for an image's absence only if it was taken after the image was last
 * saved (registered or changed): a server never inventoried, or inventoried before, counts as holding it until its
 * next round (every SERVER_HEALTH_INTERVAL_MS), as before issue 24 — an image built or loaded on the host and
 * registered a moment ago is not refused. None: 503 naming the image.
 */
export async function holdingImage(tx: EntityManager, image: Image, candidates: Server[]): Promise<Server[]> {
  if (image.kind !== 'container') return candidates;
  const vouches = (s: Server) => s.imagesCheckedAt !== null && (!image.updatedAt || s.imagesCheckedAt >= image.updatedAt);
  const inventoried = candidates.filter(vouches);
  if (inventoried.length === 0) return candidates;
  const rows: Array<{ server_id: string }> = await tx.query(
    'SELECT DISTINCT server_id FROM server_images WHERE server_id = ANY($1) AND reference = ANY($2)',
    [inventoried.map((s) => s.id), inventoryReferencesOf(image.name)],
  );
  const holding = new Set(rows.map((r) => r.server_id));
  const holders = candidates.filter((s) => !vouches(s) || holding.has(s.id));
  if (holders.length === 0) {
    throw new ApiError(ErrorCode.NoCapacity, `${NO_CAPACITY_MESSAGE} (image ${image.friendlyName}, ${image.name}, is on no reachable server that may run it; copy it with: image distribute ${image.name})`);
  }
  return holders;
}
