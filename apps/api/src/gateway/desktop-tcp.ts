import { connect, Socket } from 'node:net';
import { ReadBufferPool } from '@ws/stream';

/**
 * Connects to a port of the workspace's desktop, failing after timeoutMs. With a pool, reads arrive as 'data'
 * events as usual, but in pooled buffers (see ReadBufferPool).
 */
export function openDesktopTcp(host: string, port: number, timeoutMs: number, pool?: ReadBufferPool): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket: Socket = pool ? connect({ host, port, onread: pool.onread((chunk) => socket.emit('data', chunk)) }) : connect({ host, port });
    socket.setNoDelay(true);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connecting to ${host}:${port} timed out`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
