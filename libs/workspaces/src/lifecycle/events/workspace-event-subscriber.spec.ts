import { retryDelayMs } from './workspace-event-subscriber';

describe('subscriber retry delay', () => {
  it('starts at the backoff and doubles per failure', () => {
    expect([1, 2, 3, 4].map((n) => retryDelayMs(1000, n))).toEqual([1000, 2000, 4000, 8000]);
  });
  it('never exceeds a minute, and treats zero attempts as the first', () => {
    expect(retryDelayMs(1000, 30)).toBe(60_000);
    expect(retryDelayMs(500, 0)).toBe(500);
  });
});
