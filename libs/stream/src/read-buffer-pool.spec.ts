import { createServer, connect, Server } from 'node:net';
import { ReadBufferPool } from './read-buffer-pool';

describe('ReadBufferPool', () => {
  let server: Server;
  let port: number;
  const payload = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < payload.length; i++) payload[i] = i % 251;

  beforeAll(async () => {
    server = createServer((c) => c.end(payload));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('reuses a buffer only after release, and the data survives when copied before release', async () => {
    const pool = new ReadBufferPool(64 * 1024, 4);
    const received: Buffer[] = [];
    const buffers = new Set<ArrayBufferLike>();
    await new Promise<void>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, onread: pool.onread((chunk) => {
        buffers.add(chunk.buffer);
        received.push(Buffer.from(chunk)); // what a consumer keeps beyond the release is its own copy
        pool.release(chunk);
      }) });
      socket.on('close', () => resolve()).on('error', reject);
    });
    expect(Buffer.concat(received).equals(payload)).toBe(true);
    expect(received.length).toBeGreaterThan(10);
    expect(buffers.size).toBeLessThanOrEqual(2); // released at once: the same buffers keep coming back
  });

  it('ignores partial views and foreign buffers', () => {
    const pool = new ReadBufferPool(1024, 4);
    const options = pool.onread(() => undefined);
    const buffer = (options.buffer as () => Buffer)();
    options.callback(100, buffer);
    pool.release(Buffer.from(buffer.buffer, 10, 50));
    pool.release(Buffer.alloc(100));
    expect(pool.idle).toBe(0);
    pool.release(Buffer.from(buffer.buffer, 0, 100));
    expect(pool.idle).toBe(1);
  });
});
