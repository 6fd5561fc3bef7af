import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const MIN_SERVER_CREDENTIALS_KEY_LENGTH = 32;

/** A stored credential that cannot be read: no key, another key, or an altered value (never the database's failure). */
export class ServerCredentialError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServerCredentialError';
  }
}

/**
 * Encrypts server images' passwords at rest (AES-256-GCM). The key is derived (HKDF-SHA256) from the operator's
 * SERVER_CREDENTIALS_KEY; there is no generated fallback key, because a key kept next to the database (or in it)
 * would not protect a leaked dump. Without a key, a server image can still be made, but not with a stored password.
 * The image id is bound as associated data, so a ciphertext copied onto another image does not decrypt.
 */
export class ServerCredentialCipher {
  private readonly key: Buffer | null;

  constructor(secret: string) {
    if (secret !== '' && secret.length < MIN_SERVER_CREDENTIALS_KEY_LENGTH) {
      throw new Error(`SERVER_CREDENTIALS_KEY must be empty or at least ${MIN_SERVER_CREDENTIALS_KEY_LENGTH} characters`);
    }
    this.key = secret === '' ? null : Buffer.from(hkdfSync('sha256', secret, 'workspace-server', 'server image credentials v1', 32));
  }

  get configured(): boolean {
    return this.key !== null;
  }

  /** `v1:<iv>:<tag>:<ciphertext>` (base64url parts). */
  encrypt(plaintext: string, imageId: string): string {
    const key = this.requireKey();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(imageId, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [FORMAT, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join(':');
  }

  /** Throws when the key is missing or different, or the value was altered or belongs to another image. */
  decrypt(stored: string, imageId: string): string {
    const key = this.requireKey();
    const parts = stored.split(':');
    if (parts.length !== 4 || parts[0] !== FORMAT) throw new ServerCredentialError('not a stored server credential');
    const [iv, tag, ciphertext] = parts.slice(1).map((part) => Buffer.from(part, 'base64url'));
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new ServerCredentialError('not a stored server credential');
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(imageId, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
    } catch {
      throw new ServerCredentialError('the stored server credential does not decrypt with SERVER_CREDENTIALS_KEY (changed key, or altered value)');
    }
  }

  private requireKey(): Buffer {
    if (!this.key) throw new ServerCredentialError('SERVER_CREDENTIALS_KEY is not set: server image passwords are stored only encrypted, so set a key of at least 32 characters');
    return this.key;
  }
}
