import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ProfileMeter, ProfileTooLargeError } from './profile-meter';

const sink = () => new Writable({ write: (_chunk, _enc, done) => done() });
const chunks = (count: number, size: number) => Readable.from(Array.from({ length: count }, () => Buffer.alloc(size)));

describe('ProfileMeter', () => {
  it('counts what passes and reports progress', async () => {
    const seen: number[] = [];
    const meter = new ProfileMeter({ onProgress: (bytes) => seen.push(bytes), progressEveryMs: 0 });
    await pipeline(chunks(4, 1000), meter, sink());
    expect(meter.bytes).toBe(4000);
    expect(meter.exceeded).toBe(false);
    expect(seen).toEqual([1000, 2000, 3000, 4000]);
  });

  it('fails once more than maxBytes passed, and says so', async () => {
    const meter = new ProfileMeter({ maxBytes: 2500 });
    await expect(pipeline(chunks(4, 1000), meter, sink())).rejects.toBeInstanceOf(ProfileTooLargeError);
    expect(meter.exceeded).toBe(true);
  });

  it('holds a byte rate by delaying chunks (a lower bound only: never asserts how long it took beyond the cap)', async () => {
    // 3 chunks of 1000 bytes at 10 000 bytes/s: the last one is due 300 ms after the start.
    const meter = new ProfileMeter({ bytesPerSecond: 10_000 });
    const started = Date.now();
    await pipeline(chunks(3, 1000), meter, sink());
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });
});
