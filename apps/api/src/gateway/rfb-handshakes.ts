import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import { vncAuthResponse } from '@ws/stream';

const SECURITY_NONE = 1;
const SECURITY_VNC_AUTH = 2;
const VERSION_38 = Buffer.from('RFB 003.008\n', 'latin1');

export class HandshakeError extends Error {}

/** Reads exact byte counts from a stream of chunks, with one deadline for the whole handshake. */
class ChunkReader {
  private buffered: Buffer = Buffer.alloc(0);
  private waiter: (() => void) | null = null;
  private ended: Error | null = null;

  constructor(private readonly deadline: number) {}

  push(chunk: Buffer): void {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    this.waiter?.();
  }

  end(error: Error): void {
    this.ended = error;
    this.waiter?.();
  }

  async read(n: number, what: string): Promise<Buffer> {
    while (this.buffered.length < n) {
      if (this.ended) throw this.ended;
      const left = this.deadline - Date.now();
      if (left <= 0) throw new HandshakeError(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(timer);
          this.waiter = null;
          resolve();
        };
      });
    }
    const out = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return out;
  }

  get leftover(): number {
    return this.buffered.length;
  }
}

/**
 * The gateway's client side toward the workspace's VNC server: version 3.8 and the security the server
 * offers (VNC authentication with the workspace's password, or None). Stops before ClientInit, which the
 * browser sends through the proxy.
 */
export async function authenticateToServer(socket: Socket, password: string, timeoutMs: number): Promise<void> {
  const reader = new ChunkReader(Date.now() + timeoutMs);
  const onData = (chunk: Buffer) => reader.push(chunk);
  const onEnd = () => reader.end(new HandshakeError('the VNC server closed the connection during the handshake'));
  const onError = (err: Error) => reader.end(new HandshakeError(`VNC server: ${err.message}`));
  socket.on('data', onData).on('end', onEnd).on('error', onError);
  try {
    const version = (await reader.read(12, 'the server version')).toString('latin1');
    if (!/^RFB 003\.00[378]\n$/.test(version)) throw new HandshakeError(`unexpected server version ${JSON.stringify(version)}`);
    socket.write(VERSION_38);
    const count = (await reader.read(1, 'security types'))[0];
    if (count === 0) {
      const len = (await reader.read(4, 'failure reason')).readUInt32BE(0);
      throw new HandshakeError(`VNC server refused: ${(await reader.read(Math.min(len, 4096), 'failure reason')).toString('utf8')}`);
    }
    const types = [...(await reader.read(count, 'security types'))];
    if (types.includes(SECURITY_VNC_AUTH) && password) {
      socket.write(Buffer.from([SECURITY_VNC_AUTH]));
      const challenge = await reader.read(16, 'the VNC challenge');
      socket.write(vncAuthResponse(password, challenge));
    } else if (types.includes(SECURITY_NONE)) {
      socket.write(Buffer.from([SECURITY_NONE]));
    } else {
      throw new HandshakeError(`no usable security type (server offers ${types.join(', ')})`);
    }
    const result = (await reader.read(4, 'the security result')).readUInt32BE(0);
    if (result !== 0) {
      const len = (await reader.read(4, 'failure reason')).readUInt32BE(0);
      throw new HandshakeError(`VNC authentication failed: ${(await reader.read(Math.min(len, 4096), 'failure reason')).toString('utf8')}`);
    }
    if (reader.leftover) throw new HandshakeError('the VNC server sent data before ClientInit');
  } finally {
    socket.off('data', onData).off('end', onEnd).off('error', onError);
  }
}

/**
 * The gateway's server side toward the browser: offers only security type None, because the browser was
 * authenticated by its session token and must never learn the VNC password. Stops before ClientInit.
 */
export async function greetBrowser(ws: WebSocket, timeoutMs: number): Promise<void> {
  const reader = new ChunkReader(Date.now() + timeoutMs);
  const onMessage = (data: Buffer | ArrayBuffer | Buffer[]) => reader.push(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));
  const onClose = () => reader.end(new HandshakeError('the browser closed the connection during the handshake'));
  ws.on('message', onMessage).on('close', onClose);
  try {
    ws.send(VERSION_38);
    const version = (await reader.read(12, 'the browser version')).toString('latin1');
    const match = /^RFB 003\.00([378])\n$/.exec(version);
    if (!match) throw new HandshakeError(`unexpected browser version ${JSON.stringify(version)}`);
    if (match[1] === '3') {
      ws.send(Buffer.from([0, 0, 0, SECURITY_NONE])); // 3.3: the server picks; no SecurityResult for None
    } else {
      ws.send(Buffer.from([1, SECURITY_NONE]));
      const choice = (await reader.read(1, 'the security choice'))[0];
      if (choice !== SECURITY_NONE) throw new HandshakeError(`the browser chose security type ${choice}`);
      if (match[1] === '8') ws.send(Buffer.from([0, 0, 0, 0]));
    }
    if (reader.leftover) throw new HandshakeError('the browser sent data before the handshake finished');
  } finally {
    ws.off('message', onMessage).off('close', onClose);
  }
}
