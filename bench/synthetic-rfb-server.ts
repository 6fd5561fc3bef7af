/**
 * A synthetic RFB 3.8 server for the stream benchmark: security None, a 1024×768 32-bit framebuffer, and every
 * FramebufferUpdateRequest answered at once with the requested region in Raw, from memory, so the path between
 * it and the client, not the server, sets the pace. Run as a script: `node synthetic-rfb-server.js <port>`.
 */
import { createServer, Socket } from 'node:net';

const WIDTH = 1024;
const HEIGHT = 768;

const PIXELS = Buffer.alloc(WIDTH * HEIGHT * 4, 0x5a);

/** A FramebufferUpdate with one Raw rectangle covering the requested region (clipped to the framebuffer). */
function rawUpdate(request: Buffer): Buffer[] {
  const x = Math.min(request.readUInt16BE(2), WIDTH - 1);
  const y = Math.min(request.readUInt16BE(4), HEIGHT - 1);
  const width = Math.max(1, Math.min(request.readUInt16BE(6), WIDTH - x));
  const height = Math.max(1, Math.min(request.readUInt16BE(8), HEIGHT - y));
  const header = Buffer.alloc(16);
  header.writeUInt8(0, 0); // FramebufferUpdate
  header.writeUInt16BE(1, 2); // one rectangle
  header.writeUInt16BE(x, 4);
  header.writeUInt16BE(y, 6);
  header.writeUInt16BE(width, 8);
  header.writeUInt16BE(height, 10);
  header.writeInt32BE(0, 12); // Raw
  return [header, PIXELS.subarray(0, width * height * 4)];
}

function serverInit(): Buffer {
  const name = Buffer.from('synthetic', 'latin1');
  const init = Buffer.alloc(24 + name.length);
  init.writeUInt16BE(WIDTH, 0);
  init.writeUInt16BE(HEIGHT, 2);
  init.set([32, 24, 0, 1], 4); // bpp, depth, big-endian, true-colour
  init.writeUInt16BE(255, 8);
  init.writeUInt16BE(255, 10);
  init.writeUInt16BE(255, 12);
  init.set([16, 8, 0], 14); // shifts
  init.writeUInt32BE(name.length, 20);
  name.copy(init, 24);
  return init;
}

/** Length of the client message at the head of `buf`, or undefined until enough of it is there. */
function clientMessageLength(buf: Buffer): number | undefined {
  switch (buf[0]) {
    case 0: return 20; // SetPixelFormat
    case 2: return buf.length >= 4 ? 4 + 4 * buf.readUInt16BE(2) : undefined; // SetEncodings
    case 3: return 10; // FramebufferUpdateRequest
    case 4: return 8; // KeyEvent
    case 5: return 6; // PointerEvent
    default: throw new Error(`unexpected client message ${buf[0]}`);
  }
}

function serve(socket: Socket): void {
  socket.setNoDelay(true);
  let pending: Buffer = Buffer.alloc(0);
  let stage: 'version' | 'security' | 'init' | 'messages' = 'version';
  socket.write('RFB 003.008\n');
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    for (let guard = 0; guard < 10_000; guard++) {
      if (stage === 'version') {
        if (pending.length < 12) return;
        pending = pending.subarray(12);
        socket.write(Buffer.from([1, 1])); // one security type: None
        stage = 'security';
      } else if (stage === 'security') {
        if (pending.length < 1) return;
        pending = pending.subarray(1);
        socket.write(Buffer.from([0, 0, 0, 0])); // SecurityResult OK
        stage = 'init';
      } else if (stage === 'init') {
        if (pending.length < 1) return;
        pending = pending.subarray(1); // ClientInit
        socket.write(serverInit());
        stage = 'messages';
      } else {
        if (pending.length < 1) return;
        const length = clientMessageLength(pending);
        if (length === undefined || pending.length < length) return;
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        if (message[0] === 3) {
          socket.cork();
          for (const part of rawUpdate(message)) socket.write(part);
          socket.uncork();
        }
      }
    }
  });
}

if (require.main === module) {
  const port = Number(process.argv[2]);
  createServer(serve).listen(port, '127.0.0.1');
}
