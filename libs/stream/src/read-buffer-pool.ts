import type { OnReadOpts } from 'node:net';

/**
 * Read buffers for a socket that are reused once the data read into them has been written on, instead of
 * a fresh allocation per read. In a process with a large heap (the api), the garbage collections those
 * allocations trigger cost the stream gateway several percent of its throughput.
 *
 * Only a whole read comes back to the pool (a chunk of byteOffset 0 and exactly the length read), and only
 * through `release`, which the owner calls when nothing references the chunk any more: the stream proxy
 * does so from the websocket send callback, and its parser copies what it keeps across reads.
 */
export class ReadBufferPool {
  private readonly free: Buffer[] = [];
  private readonly filled = new WeakMap<ArrayBufferLike, number>();

  constructor(
    readonly bufferBytes = 256 * 1024,
    private readonly keep = 32,
  ) {}

  /** `onread` options for net.connect: each read lands in a pooled buffer and is handed to `deliver`. */
  onread(deliver: (chunk: Buffer) => void): OnReadOpts {
    return {
      buffer: () => this.free.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes),
      callback: (bytes: number, buffer: Uint8Array) => {
        this.filled.set(buffer.buffer, bytes);
        deliver(Buffer.from(buffer.buffer, buffer.byteOffset, bytes));
        return true; // keep reading; the owner pauses the socket itself for backpressure
      },
    };
  }

  release(chunk: Buffer): void {
    const bytes = this.filled.get(chunk.buffer);
    if (bytes === undefined || chunk.byteOffset !== 0 || chunk.length !== bytes) return;
    this.filled.delete(chunk.buffer);
    if (this.free.length < this.keep) this.free.push(Buffer.from(chunk.buffer, 0, this.bufferBytes));
  }

  /** Buffers waiting to be reused (for tests and stats). */
  get idle(): number {
    return this.free.length;
  }
}
