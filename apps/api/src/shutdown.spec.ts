import { ApiShutdown } from './shutdown';

describe('ApiShutdown: operations still running at shutdown', () => {
  afterEach(() => jest.useRealTimers());

  it('is ended at once when nothing runs', async () => {
    await expect(new ApiShutdown().operationsEnded(1_000)).resolves.toBe(true);
  });

  it('waits for the last running operation to end', async () => {
    const shutdown = new ApiShutdown();
    shutdown.operationStarted();
    shutdown.operationStarted();
    let settled: boolean | undefined;
    const ended = shutdown.operationsEnded(60_000).then((value) => (settled = value));
    shutdown.operationEnded();
    await Promise.resolve();
    expect(settled).toBeUndefined();
    expect(shutdown.operationsRunning).toBe(1);
    shutdown.operationEnded();
    await expect(ended).resolves.toBe(true);
  });

  it('gives up after its bound, saying so, and a later end does not throw', async () => {
    jest.useFakeTimers();
    const shutdown = new ApiShutdown();
    shutdown.operationStarted();
    const ended = shutdown.operationsEnded(5_000);
    jest.advanceTimersByTime(5_000);
    await expect(ended).resolves.toBe(false);
    expect(shutdown.operationsRunning).toBe(1);
    expect(() => shutdown.operationEnded()).not.toThrow();
    expect(shutdown.operationsRunning).toBe(0);
  });
});
