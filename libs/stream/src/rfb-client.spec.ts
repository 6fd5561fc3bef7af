import { AddressInfo, Server, Socket, createServer } from 'net';
import { vncAuthResponse } from './des';
import { RfbError } from './errors';
import { RGBX32, encodePixelFormat } from './pixel-format';
import { RfbClient } from './rfb-client';
import { cat, rectHeader, serverInit, serverMessages as sm, u16, u32, u8, update, version } from './rfb-test-helpers';

/** Minimal scripted peer: read(n) resolves with the next n bytes the client sent. */
class Peer {
  private buf = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  private closed = false;
  constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake?.();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
    socket.on('error', () => undefined);
  }
  async read(n: number): Promise<Buffer> {
    const deadline = Date.now() + 5000;
    while (this.buf.length < n) {
      if (this.closed) throw new Error('peer: client closed the connection');
      if (Date.now() > deadline) throw new Error(`peer timed out waiting for ${n} bytes`);
      await new Promise<void>((r) => {
        const timer = setTimeout(r, 100);
        this.wake = () => {
          clearTimeout(timer);
          r();
        };
      });
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }
  write(...parts: Buffer[]): void {
    this.socket.write(cat(...parts));
  }
  /** Serves a 3.8 handshake with security None and a `width`×`height` desktop, up to the client's setup messages. */
  async acceptWithoutAuth(width: number, height: number): Promise<void> {
    this.write(version(8));
    await this.read(12);
    this.write(u8(1, 1));
    await this.read(1);
    this.write(u32(0));
    await this.read(1);
    this.write(serverInit(width, height));
    await this.clientSetup();
  }
  /** Reads the SetPixelFormat + SetEncodings the client sends after ServerInit. */
  async clientSetup(): Promise<{ pixelFormat: Buffer; encodings: number[] }> {
    const spf = await this.read(20);
    const head = await this.read(4);
    const list = await this.read(4 * head.readUInt16BE(2));
    return { pixelFormat: spf.subarray(4), encodings: [0, 1, 2].map((i) => list.readInt32BE(4 * i)) };
  }
}

let server: Server;
let port: number;
let script: (peer: Peer) => Promise<void>;
const failures: unknown[] = [];
const sockets = new Set<Socket>();

beforeAll(async () => {
  server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    script(new Peer(socket)).catch((e) => failures.push(e));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});
afterEach(() => expect(failures.splice(0)).toEqual([]));

const rgbx = (r: number, g: number, b: number) => u8(r, g, b, 0);

describe('RfbClient', () => {
  it('3.8 / None: handshake, skips colour map / bell / cut text, Raw + CopyRect until the frame is covered', async () => {
    script = async (peer) => {
      peer.write(version(8));
      expect((await peer.read(12)).toString()).toBe('RFB 003.008\n');
      peer.write(u8(1, 1));
      expect(await peer.read(1)).toEqual(u8(1));
      peer.write(u32(0));
      expect(await peer.read(1)).toEqual(u8(1)); // shared
      peer.write(serverInit(4, 2, 'fake'));
      const setup = await peer.clientSetup();
      expect(setup.pixelFormat).toEqual(encodePixelFormat(RGBX32));
      expect(setup.encodings).toEqual([0, 1, -223]);
      const req = await peer.read(10);
      expect([...req]).toEqual([3, 0, 0, 0, 0, 0, 0, 4, 0, 2]);
      peer.write(sm.colourMap(2), sm.bell(), sm.cutText('clip'));
      // First update covers only the left half.
      peer.write(update([cat(rectHeader(0, 0, 2, 2, 0), rgbx(1, 2, 3), rgbx(4, 5, 6), rgbx(7, 8, 9), rgbx(10, 11, 12))]));
      expect((await peer.read(10))[1]).toBe(0); // asked again, non-incremental
      peer.write(update([cat(rectHeader(2, 0, 2, 2, 1), u16(0), u16(0))]));
    };
    const client = await RfbClient.connect('127.0.0.1', port, { timeoutMs: 5000 });
    expect(client.info).toMatchObject({ version: '3.8', securityType: 1, width: 4, height: 2, name: 'fake', serverVersion: 'RFB 003.008' });
    const frame = await client.captureFrame({ timeoutMs: 5000 });
    expect(frame.width).toBe(4);
    expect([...frame.data]).toEqual([1, 2, 3, 255, 4, 5, 6, 255, 1, 2, 3, 255, 4, 5, 6, 255, 7, 8, 9, 255, 10, 11, 12, 255, 7, 8, 9, 255, 10, 11, 12, 255]);
    await client.close();
  });

  it('3.8 / VNC auth: sends the DES response; a wrong password fails with the server reason', async () => {
    script = async (peer) => {
      peer.write(version(8));
      await peer.read(12);
      peer.write(u8(2, 1, 2)); // client with a password prefers VNC auth
      expect(await peer.read(1)).toEqual(u8(2));
      const challenge = Buffer.from('0123456789abcdef');
      peer.write(challenge);
      const response = await peer.read(16);
      if (response.equals(vncAuthResponse('secret', challenge, 'pure-ts'))) {
        peer.write(u32(0));
        await peer.read(1);
        peer.write(serverInit(1, 1));
      } else {
        const reason = Buffer.from('password check failed');
        peer.write(u32(1), u32(reason.length), reason);
        peer.socket.end();
      }
    };
    const ok = await RfbClient.connect('127.0.0.1', port, { password: 'secret', timeoutMs: 5000 });
    expect(ok.info.securityType).toBe(2);
    await ok.close();
    const error = await RfbClient.connect('127.0.0.1', port, { password: 'wrong', timeoutMs: 5000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RfbError);
    expect(error).toMatchObject({ kind: 'auth_failed', reason: 'password check failed' });
  });

  it('3.3: server-chosen VNC auth; no password → auth_required', async () => {
    script = async (peer) => {
      peer.write(version(3));
      expect((await peer.read(12)).toString()).toBe('RFB 003.003\n');
      peer.write(u32(2), Buffer.alloc(16, 7));
      const response = await peer.read(16).catch(() => undefined);
      if (!response) return;
      peer.write(u32(response.equals(vncAuthResponse('pw', Buffer.alloc(16, 7))) ? 0 : 1));
      await peer.read(1);
      peer.write(serverInit(2, 2));
    };
    const client = await RfbClient.connect('127.0.0.1', port, { password: 'pw', timeoutMs: 5000 });
    expect(client.info.version).toBe('3.3');
    await client.close();
    await expect(RfbClient.connect('127.0.0.1', port, { timeoutMs: 5000 })).rejects.toMatchObject({ kind: 'auth_required' });
  });

  it('handles DesktopSize in the middle of a capture', async () => {
    script = async (peer) => {
      await peer.acceptWithoutAuth(8, 8);
      await peer.read(10);
      peer.write(update([rectHeader(0, 0, 2, 1, -223)]));
      const again = await peer.read(10);
      expect([again.readUInt16BE(6), again.readUInt16BE(8)]).toEqual([2, 1]);
      peer.write(update([cat(rectHeader(0, 0, 2, 1, 0), rgbx(9, 9, 9), rgbx(8, 8, 8))]));
    };
    const client = await RfbClient.connect('127.0.0.1', port, { timeoutMs: 5000 });
    const frame = await client.captureFrame({ timeoutMs: 5000 });
    expect([frame.width, frame.height, ...frame.data]).toEqual([2, 1, 9, 9, 9, 255, 8, 8, 8, 255]);
    await client.close();
  });

  it('settles: applies updates that arrive after the full frame until the server is quiet', async () => {
    script = async (peer) => {
      await peer.acceptWithoutAuth(2, 1);
      await peer.read(10);
      peer.write(update([cat(rectHeader(0, 0, 2, 1, 0), rgbx(0, 0, 0), rgbx(0, 0, 0))])); // stale snapshot
      expect((await peer.read(10))[1]).toBe(1); // incremental
      await new Promise((r) => setTimeout(r, 100)); // the server notices the change a little later
      peer.write(sm.bell(), update([cat(rectHeader(1, 0, 1, 1, 0), rgbx(5, 6, 7))]));
      expect((await peer.read(10))[1]).toBe(1); // asks for more; the server stays quiet
    };
    const client = await RfbClient.connect('127.0.0.1', port, { timeoutMs: 5000 });
    const frame = await client.captureFrame({ timeoutMs: 5000, settleMs: 400 });
    expect([...frame.data]).toEqual([0, 0, 0, 255, 5, 6, 7, 255]);
    await client.close();
  });

  it('fails with typed errors: refused, timeout, protocol', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    await expect(RfbClient.connect('127.0.0.1', freePort, { timeoutMs: 5000 })).rejects.toMatchObject({ kind: 'connection_refused' });

    script = async () => undefined; // accepts, never speaks
    await expect(RfbClient.connect('127.0.0.1', port, { timeoutMs: 300 })).rejects.toMatchObject({ kind: 'timeout' });

    script = async (peer) => peer.write(Buffer.from('SSH-2.0-OpenSSH\r\n'));
    await expect(RfbClient.connect('127.0.0.1', port, { timeoutMs: 5000 })).rejects.toMatchObject({ kind: 'protocol' });
  });
});
