/**
 * The key of a server's placement lock, a transaction-scoped advisory lock (`$1`: the server's id). Launches take it
 * while they place a workspace on the server (@ws/workspaces' lockPlacedServer), and `server remove` while it counts
 * the server's workspaces. It is not the server's row: writers of that row (the health round's check time, the
 * image inventory's, an operator's change) then never make a launch skip the server as if another launch held it;
 * with the row locked, a launch that met a health round's update went to a smaller host (host-health CI,
 * 2026-11-28). A savepoint's rollback releases it; lock_timeout bounds the wait for it.
 */
export const PLACEMENT_LOCK_KEY_SQL = "hashtextextended('ws_placement:' || $1::text, 0)";
