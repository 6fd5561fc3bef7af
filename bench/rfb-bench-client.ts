import { connect, Socket } from 'node:net';
import { WebSocket } from 'ws';
import { vncAuthResponse } from '@ws/stream';

/** FIFO of received chunks; skip() drops bytes without copying, so large frames cost the client little. */
class ByteQueue {
  private chunks: Buffer[] = [];
  private length = 0;
  private waiter: (() => void) | null = null;
  private error: Error | null = null;

  /** Every byte ever received. */
  received = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    this.received += chunk.length;
    this.waiter?.();
  }

  fail(error: Error): void {
    this.error = error;
    this.waiter?.();
  }

  private async need(n: number): Promise<void> {
    while (this.length < n) {
      if (this.error) throw this.error;
      await new Promise<void>((resolve) => (this.waiter = resolve));
      this.waiter = null;
    }
  }

  async read(n: number): Promise<Buffer> {
    await this.need(n);
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const head = this.chunks[0];
      const take = Math.min(head.length, n - filled);
      head.copy(out, filled, 0, take);
      filled += take;
      if (take === head.length) this.chunks.shift();
      else this.chunks[0] = head.subarray(take);
    }
    this.length -= n;
    return out;
  }

  async skip(n: number): Promise<void> {
    let left = n;
    while (left > 0) {
      await this.need(1);
      const head = this.chunks[0];
      const take = Math.min(head.length, left);
      if (take === head.length) this.chunks.shift();
      else this.chunks[0] = head.subarray(take);
      this.length -= take;
      left -= take;
    }
  }
}

/** `headers` carries what a browser would send, e.g. the gateway's stream cookie. */
export type Transport = { kind: 'tcp'; host: string; port: number } | { kind: 'ws'; url: string; protocols?: string[]; headers?: Record<string, string> };

/** A minimal RFB client for benchmarks: Raw encoding only, one request at a time. */
export class RfbBenchClient {
  private readonly queue = new ByteQueue();
  private send!: (b: Buffer) => void;
  private close!: () => void;
  width = 0;
  height = 0;
  private bytesPerPixel = 4;

  static async open(transport: Transport, password?: string): Promise<RfbBenchClient> {
    const client = new RfbBenchClient();
    await client.connect(transport);
    await client.handshake(password);
    return client;
  }

  private connect(transport: Transport): Promise<void> {
    return new Promise((resolve, reject) => {
      if (transport.kind === 'tcp') {
        const socket: Socket = connect({ host: transport.host, port: transport.port }, () => resolve());
        socket.setNoDelay(true);
        socket.on('data', (c: Buffer) => this.queue.push(c)).on('error', (e) => (reject(e), this.queue.fail(e))).on('close', () => this.queue.fail(new Error('closed')));
        this.send = (b) => socket.write(b);
        this.close = () => socket.destroy();
      } else {
        const ws = new WebSocket(transport.url, transport.protocols ?? [], { perMessageDeflate: false, headers: transport.headers });
        ws.binaryType = 'nodebuffer';
        ws.on('message', (data: Buffer) => this.queue.push(data)).on('open', () => resolve()).on('error', (e) => (reject(e), this.queue.fail(e))).on('close', () => this.queue.fail(new Error('closed')));
        this.send = (b) => ws.send(b);
        this.close = () => ws.terminate();
      }
    });
  }

  private async handshake(password?: string): Promise<void> {
    await this.queue.read(12);
    this.send(Buffer.from('RFB 003.008\n', 'latin1'));
    const count = (await this.queue.read(1))[0];
    const types = [...(await this.queue.read(count))];
    if (types.includes(2) && password) {
      this.send(Buffer.from([2]));
      this.send(vncAuthResponse(password, await this.queue.read(16)));
    } else if (types.includes(1)) {
      this.send(Buffer.from([1]));
    } else {
      throw new Error(`no usable security type in ${types.join(',')}`);
    }
    if ((await this.queue.read(4)).readUInt32BE(0) !== 0) throw new Error('authentication failed');
    this.send(Buffer.from([1]));
    const init = await this.queue.read(24);
    this.width = init.readUInt16BE(0);
    this.height = init.readUInt16BE(2);
    this.bytesPerPixel = init[4] / 8;
    await this.queue.skip(init.readUInt32BE(20));
    const encodings = Buffer.alloc(8);
    encodings[0] = 2;
    encodings.writeUInt16BE(1, 2);
    encodings.writeInt32BE(0, 4); // Raw only
    this.send(encodings);
  }

  private request(x: number, y: number, width: number, height: number): void {
    const request = Buffer.alloc(10);
    request[0] = 3;
    request.writeUInt16BE(x, 2);
    request.writeUInt16BE(y, 4);
    request.writeUInt16BE(width, 6);
    request.writeUInt16BE(height, 8);
    this.send(request);
  }

  /** Requests a region (non-incremental) and reads the whole answer; returns its bytes. */
  async roundTrip(x: number, y: number, width: number, height: number): Promise<number> {
    this.request(x, y, width, height);
    return this.readUpdate();
  }

  /**
   * Keeps `inFlight` full-screen requests outstanding for `durationMs`, so the server never waits on the
   * client; answers the bytes received and the window's length. The server may merge outstanding
   * requests, so the client is left with requests in flight: close it afterwards.
   */
  async stream(durationMs: number, inFlight: number): Promise<{ bytes: number; ms: number }> {
    for (let i = 0; i < inFlight; i++) this.request(0, 0, this.width, this.height);
    const startBytes = this.queue.received;
    const start = performance.now();
    const end = start + durationMs;
    while (performance.now() < end) {
      await this.readUpdate();
      if (performance.now() < end) this.request(0, 0, this.width, this.height);
    }
    return { bytes: this.queue.received - startBytes, ms: performance.now() - start };
  }

  private async readUpdate(): Promise<number> {
    for (;;) {
      const type = (await this.queue.read(1))[0];
      if (type === 2) continue; // bell
      if (type === 3) {
        await this.queue.skip((await this.queue.read(7)).readUInt32BE(3));
        continue;
      }
      if (type !== 0) throw new Error(`unexpected server message ${type}`);
      const rects = (await this.queue.read(3)).readUInt16BE(1);
      let bytes = 4;
      for (let i = 0; i < rects; i++) {
        const header = await this.queue.read(12);
        const payload = header.readInt32BE(8) === 0 ? header.readUInt16BE(4) * header.readUInt16BE(6) * this.bytesPerPixel : 0;
        await this.queue.skip(payload);
        bytes += 12 + payload;
      }
      return bytes;
    }
  }

  end(): void {
    this.close();
  }
}
