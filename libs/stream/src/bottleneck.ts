/**
 * Bottleneck figures [cpu, cpu_avg, network, network_avg], each 0–10, lower = more constrained.
 *
 *   score(cost, budget) = 10                         when cost <= budget (or nothing measured yet)
 *                       = 10 * budget / cost         otherwise (rounded to 0.1; 2x over budget = 5, 10x = 1)
 *
 * cpu          = score(mean server processing time of the updates completed in the last 5 s, frameBudgetMs)
 * cpu_avg      = score(EWMA(α = 0.1) of the server processing time over the whole session, frameBudgetMs)
 *   Server processing time of one update = time the server visibly spends producing it, minus any time the
 *   proxy had paused reading the VNC socket (backpressure) during it:
 *     - answer to a non-incremental request: request → last byte of the update (`server_time`; the server
 *       must answer at once, so all of it is work),
 *     - answer to an incremental request: first → last byte of the update. The wait before the first byte
 *       is excluded because a server legitimately holds incremental requests until the screen changes.
 *   The VNC server is next to the proxy (loopback/bridge), so the time an update takes to stream in is the
 *   server encoding it, not the network. frameBudgetMs defaults to 1000/30 (a 30 fps frame interval).
 *
 * network      = score(rtt + drain, networkBudgetMs)
 * network_avg  = score(EWMA(α = 0.2) of (rtt + drain) sampled at each pong, networkBudgetMs)
 *   rtt   = last websocket ping→pong round trip to the browser (or the age of an unanswered ping, if longer);
 *   drain = ws.bufferedAmount / delivery rate, the time the backlog queued for the browser needs to drain,
 *           where delivery rate = bytes the socket took off the backlog per second over the last 5 s
 *           (10 s when there is a backlog but nothing drained). networkBudgetMs defaults to 50.
 */

export type BottleneckFigures = [cpu: number, cpuAvg: number, network: number, networkAvg: number];

export const DEFAULT_FRAME_BUDGET_MS = 1000 / 30;
export const DEFAULT_NETWORK_BUDGET_MS = 50;
export const MAX_DRAIN_MS = 10_000;
export const CPU_EWMA_ALPHA = 0.1;
export const NETWORK_EWMA_ALPHA = 0.2;

export interface BottleneckInputs {
  /** Mean server processing ms of updates completed in the last 5 s; undefined when there were none. */
  processingMs?: number;
  /** Session EWMA of server processing ms; undefined before the first update. */
  processingEwmaMs?: number;
  /** Last ping RTT (or age of an unanswered ping if larger); undefined before the first pong. */
  rttMs?: number;
  /** Session EWMA of rtt + drain; undefined before the first pong. */
  networkEwmaMs?: number;
  /** ws.bufferedAmount now. */
  bufferedBytes: number;
  /** Bytes per second the socket drained from the backlog over the last 5 s. */
  drainBytesPerSec?: number;
  frameBudgetMs?: number;
  networkBudgetMs?: number;
}

const round1 = (x: number) => Math.round(x * 10) / 10;

export function bottleneckScore(costMs: number | undefined, budgetMs: number): number {
  if (costMs === undefined || !Number.isFinite(costMs) || costMs <= budgetMs) return 10;
  return Math.max(0, Math.min(10, round1((10 * budgetMs) / costMs)));
}

/** Time to drain `bufferedBytes` at `bytesPerSec` (0 without backlog, MAX_DRAIN_MS when nothing drains). */
export function backlogDrainMs(bufferedBytes: number, bytesPerSec: number | undefined): number {
  if (bufferedBytes <= 0) return 0;
  if (!bytesPerSec || bytesPerSec <= 0) return MAX_DRAIN_MS;
  return Math.min(MAX_DRAIN_MS, (bufferedBytes / bytesPerSec) * 1000);
}

/** Exponentially weighted moving average step (first sample initialises it). */
export function ewma(previous: number | undefined, sample: number, alpha: number): number {
  return previous === undefined ? sample : previous + alpha * (sample - previous);
}

export function computeBottleneck(input: BottleneckInputs): BottleneckFigures {
  const frameBudget = input.frameBudgetMs ?? DEFAULT_FRAME_BUDGET_MS;
  const networkBudget = input.networkBudgetMs ?? DEFAULT_NETWORK_BUDGET_MS;
  const drain = backlogDrainMs(input.bufferedBytes, input.drainBytesPerSec);
  const networkNow = input.rttMs === undefined && drain === 0 ? undefined : (input.rttMs ?? 0) + drain;
  return [
    bottleneckScore(input.processingMs, frameBudget),
    bottleneckScore(input.processingEwmaMs, frameBudget),
    bottleneckScore(networkNow, networkBudget),
    bottleneckScore(input.networkEwmaMs, networkBudget),
  ];
}
