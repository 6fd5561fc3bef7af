import { Readable } from 'node:stream';
import { hashStream } from './hashing';
import { ObjectStore, PutOptions, PutResult, VerificationError } from './object-store';

export interface Expected {
  /** When known in advance (e.g. a tar of known length), checked against what was sent and what was stored. */
  size?: number;
  sha256?: string;
}

/**
 * Writes a NEW object and proves the store holds exactly the bytes sent: the stored size (head) must equal the
 * counted size, and the SHA-256 of the object read back must equal the SHA-256 computed while sending (and
 * `expected`, when given). On any mismatch the new object is deleted and VerificationError is thrown; nothing
 * else is touched, so a caller that only switches its pointer record after this returns never points at a
 * corrupt object. Costs one extra streamed read of the object.
 *
 * Use a key no reader uses yet (e.g. with a generation id); overwriting the live object defeats the purpose.
 */
export async function putVerified(store: ObjectStore, key: string, body: Readable, expected: Expected = {}, options: PutOptions = {}): Promise<PutResult> {
  const written = await store.put(key, body, options);
  try {
    if (expected.size !== undefined && written.size !== expected.size) throw new VerificationError(`${key}: sent ${written.size} bytes, expected ${expected.size}`);
    if (expected.sha256 !== undefined && written.sha256 !== expected.sha256) throw new VerificationError(`${key}: sent bytes with SHA-256 ${written.sha256}, expected ${expected.sha256}`);
    const info = await store.head(key);
    if (!info) throw new VerificationError(`${key}: not found after writing it`);
    if (info.size !== written.size) throw new VerificationError(`${key}: stored ${info.size} bytes, sent ${written.size}`);
    const stored = await hashStream(await store.get(key));
    if (stored.size !== written.size || stored.sha256 !== written.sha256) throw new VerificationError(`${key}: stored bytes differ from those sent (SHA-256 ${stored.sha256}, sent ${written.sha256})`);
    return written;
  } catch (err) {
    await store.delete(key).catch(() => undefined);
    throw err;
  }
}
