/**
 * The stream gateway's proxying as the api runs it (RfbSession over pooled reads), alone in a process, for the
 * proxy-capacity benchmark: `node session-proxy.js <listen port> <vnc port>`. The browser side does the RFB
 * handshake itself here (no pre-authentication), which changes nothing once frames stream.
 */
import { connect, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { ReadBufferPool } from '@ws/stream/read-buffer-pool';
import { RfbSession } from '@ws/stream/rfb-proxy';

if (require.main === module) {
  const [listenPort, vncPort] = process.argv.slice(2).map(Number);
  const pool = new ReadBufferPool();
  const wss = new WebSocketServer({ port: listenPort, host: '127.0.0.1', perMessageDeflate: false }, () => process.send?.('listening'));
  wss.on('connection', (ws) => {
    const socket: Socket = connect({ host: '127.0.0.1', port: vncPort, onread: pool.onread((chunk) => socket.emit('data', chunk)) });
    new RfbSession(ws, socket, { onChunkSent: (chunk) => pool.release(chunk) });
  });
}
