import { MAX_DRAIN_MS, backlogDrainMs, bottleneckScore, computeBottleneck, ewma } from './bottleneck';

describe('bottleneck math', () => {
  it('scores 10 within budget and 10*budget/cost beyond it', () => {
    expect(bottleneckScore(undefined, 50)).toBe(10);
    expect(bottleneckScore(0, 50)).toBe(10);
    expect(bottleneckScore(50, 50)).toBe(10);
    expect(bottleneckScore(100, 50)).toBe(5);
    expect(bottleneckScore(500, 50)).toBe(1);
    expect(bottleneckScore(150, 50)).toBe(3.3);
    expect(bottleneckScore(1e9, 50)).toBe(0);
    expect(bottleneckScore(Number.POSITIVE_INFINITY, 50)).toBe(10); // not measurable → no evidence of a constraint
  });

  it('computes the backlog drain time', () => {
    expect(backlogDrainMs(0, undefined)).toBe(0);
    expect(backlogDrainMs(1_000_000, 2_000_000)).toBe(500);
    expect(backlogDrainMs(1, 0)).toBe(MAX_DRAIN_MS);
    expect(backlogDrainMs(1e12, 1)).toBe(MAX_DRAIN_MS);
  });

  it('ewma starts at the first sample', () => {
    expect(ewma(undefined, 10, 0.2)).toBe(10);
    expect(ewma(10, 20, 0.2)).toBeCloseTo(12);
  });

  it('derives [cpu, cpu_avg, network, network_avg]', () => {
    expect(computeBottleneck({ bufferedBytes: 0 })).toEqual([10, 10, 10, 10]);
    const budget = 1000 / 30;
    expect(
      computeBottleneck({ processingMs: 2 * budget, processingEwmaMs: 4 * budget, rttMs: 20, networkEwmaMs: 200, bufferedBytes: 0, drainBytesPerSec: 1e6 }),
    ).toEqual([5, 2.5, 10, 2.5]);
    // 80 ms RTT plus 1 MB backlog draining at 4 MB/s (250 ms) = 330 ms against a 50 ms budget.
    expect(computeBottleneck({ rttMs: 80, bufferedBytes: 1e6, drainBytesPerSec: 4e6 })[2]).toBe(1.5);
    // A backlog alone counts even before the first pong.
    expect(computeBottleneck({ bufferedBytes: 1e6, drainBytesPerSec: 1e7 })[2]).toBe(5);
    // Custom budgets.
    expect(computeBottleneck({ processingMs: 100, bufferedBytes: 0, frameBudgetMs: 100, rttMs: 200, networkBudgetMs: 100 })).toEqual([10, 10, 5, 10]);
  });
});
