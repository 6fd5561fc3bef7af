import * as net from 'node:net';
import { RfbTimeoutError } from './errors';
import { waitForRfb } from './rfb';

/** A local TCP server on 127.0.0.1 whose behaviour per connection number is scripted. */
async function server(onConnection: (socket: net.Socket, n: number) => void): Promise<{ port: number; close: () => Promise<void>; count: () => number }> {
  let n = 0;
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket, n++);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  return {
    port,
    count: () => n,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        srv.close(() => resolve());
      }),
  };
}

describe('waitForRfb', () => {
  it('resolves on the banner', async () => {
    const s = await server((socket) => socket.write('RFB 003.008\n'));
    try {
      const ms = await waitForRfb('127.0.0.1', s.port, { timeoutMs: 5000 });
      expect(typeof ms).toBe('number');
    } finally {
      await s.close();
    }
  });

  it('retries connections closed before the banner (docker-proxy) and banners split in pieces', async () => {
    const s = await server((socket, n) => {
      if (n < 3) return void socket.destroy();
      socket.write('RFB 00');
      setImmediate(() => socket.write('3.003\n'));
    });
    try {
      await waitForRfb('127.0.0.1', s.port, { timeoutMs: 10_000 });
      expect(s.count()).toBe(4);
    } finally {
      await s.close();
    }
  });

  it('rejects with RfbTimeoutError when nothing answers', async () => {
    const s = await server(() => undefined);
    const port = s.port;
    await s.close(); // now refused
    const err = await waitForRfb('127.0.0.1', port, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RfbTimeoutError);
    expect((err as RfbTimeoutError).message).toMatch(new RegExp(`No VNC \\(RFB\\) banner on 127.0.0.1:${port} within 300 ms after \\d+ attempts \\(last: .*ECONNREFUSED`));
  });

  it('rejects on a wrong banner and a silent server', async () => {
    const wrong = await server((socket) => socket.write('HTTP/1.1 400 Bad Request\r\n'));
    const silent = await server(() => undefined);
    try {
      const err = (await waitForRfb('127.0.0.1', wrong.port, { timeoutMs: 300 }).catch((e: unknown) => e)) as Error;
      // What the port sent is never quoted (the message can reach an operational_message).
      expect(err.message).toMatch(/the first 12 bytes are not an RFB banner/);
      expect(err.message).not.toContain('HTTP');
      await expect(waitForRfb('127.0.0.1', silent.port, { timeoutMs: 300 })).rejects.toThrow(/no banner within/);
    } finally {
      await wrong.close();
      await silent.close();
    }
  });

  it('stops when aborted', async () => {
    const silent = await server(() => undefined);
    const controller = new AbortController();
    try {
      const p = waitForRfb('127.0.0.1', silent.port, { timeoutMs: 60_000, signal: controller.signal });
      controller.abort(new Error('job cancelled'));
      await expect(p).rejects.toThrow('job cancelled');
    } finally {
      await silent.close();
    }
  });

  it('validates the port', async () => {
    await expect(waitForRfb('127.0.0.1', 0)).rejects.toThrow(RangeError);
  });
});
