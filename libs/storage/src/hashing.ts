import { createHash, Hash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** A pass-through that counts and (unless told not to) SHA-256-hashes what flows through it. */
export class HashingStream extends Transform {
  /** Named so that lib-storage does not take it for a Blob's `size` (the total length) of a stream. */
  byteCount = 0;
  private readonly hash: Hash | null;

  constructor(hash = true) {
    super();
    this.hash = hash ? createHash('sha256') : null;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: () => void): void {
    this.byteCount += chunk.length;
    this.hash?.update(chunk);
    this.push(chunk);
    callback();
  }

  /** Hex SHA-256 of what passed; '' for a stream made not to hash. */
  digest(): string {
    return this.hash ? this.hash.digest('hex') : '';
  }
}

/** Size and SHA-256 of a stream, read to its end in chunks. */
export async function hashStream(body: Readable): Promise<{ size: number; sha256: string }> {
  const hasher = new HashingStream();
  hasher.resume();
  await pipeline(body, hasher);
  return { size: hasher.byteCount, sha256: hasher.digest() };
}
