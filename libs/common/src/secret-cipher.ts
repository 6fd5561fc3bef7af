import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** The operator's key setting (AppConfig.SERVER_CREDENTIALS_KEY) that every secret stored at rest is sealed under. */
export const SECRETS_KEY_SETTING = 'SERVER_CREDENTIALS_KEY';
export const MIN_SECRETS_KEY_LENGTH = 32;

/** A stored secret that cannot be read or sealed: no key, another key, or an altered value (never the database's failure). */
export class SecretCipherError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretCipherError';
  }
}

/** What a cipher seals: its own derived key (HKDF info) and the words its messages use. */
export interface SecretPurpose {
  /** HKDF info: one derived key per purpose, so a value sealed for one purpose never opens under another. */
  readonly info: string;
  /** Plural noun for messages, e.g. "server image passwords". */
  readonly what: string;
  /** Singular noun for messages, e.g. "server credential". */
  readonly one: string;
}

/**
 * Secrets at rest (AES-256-GCM), one helper for every area that stores one (server images' passwords, egress
 * credentials' secrets). The key is derived (HKDF-SHA256) from the operator's SERVER_CREDENTIALS_KEY and the
 * purpose; there is no generated fallback key, because a key kept next to the database (or in it) would not protect a
 * leaked dump. The caller binds each value to where it is stored (associated data, e.g. the row id and column), so a
 * ciphertext copied onto another row or column does not decrypt.
 */
export class SecretCipher {
  private readonly key: Buffer | null;

  constructor(secret: string, private readonly purpose: SecretPurpose) {
    if (secret !== '' && secret.length < MIN_SECRETS_KEY_LENGTH) {
      throw new Error(`${SECRETS_KEY_SETTING} must be empty or at least ${MIN_SECRETS_KEY_LENGTH} characters`);
    }
    this.key = secret === '' ? null : Buffer.from(hkdfSync('sha256', secret, 'workspace-server', purpose.info, 32));
  }

  get configured(): boolean {
    return this.key !== null;
  }

  /** Whether the value has the sealed form `v1:<iv>:<tag>:<ciphertext>` (says nothing about the key). */
  static isSealed(value: string): boolean {
    const parts = value.split(':');
    if (parts.length !== 4 || parts[0] !== FORMAT || parts.slice(1).some((p) => !/^[A-Za-z0-9_-]*$/.test(p))) return false;
    return Buffer.from(parts[1], 'base64url').length === IV_BYTES && Buffer.from(parts[2], 'base64url').length === TAG_BYTES;
  }

  /** `v1:<iv>:<tag>:<ciphertext>` (base64url parts), bound to `boundTo`. */
  encrypt(plaintext: string, boundTo: string): string {
    const key = this.requireKey();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(boundTo, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [FORMAT, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join(':');
  }

  /** Throws when the key is missing or different, or the value was altered or bound to something else. */
  decrypt(stored: string, boundTo: string): string {
    const key = this.requireKey();
    if (!SecretCipher.isSealed(stored)) throw new SecretCipherError(`not a stored ${this.purpose.one}`);
    const [iv, tag, ciphertext] = stored.split(':').slice(1).map((part) => Buffer.from(part, 'base64url'));
    const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(boundTo, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretCipherError(`the stored ${this.purpose.one} does not decrypt with ${SECRETS_KEY_SETTING} (changed key, or altered value)`);
    }
  }

  private requireKey(): Buffer {
    if (!this.key) {
      throw new SecretCipherError(
        `${SECRETS_KEY_SETTING} is not set: ${this.purpose.what} are stored only encrypted, so set a key of at least ${MIN_SECRETS_KEY_LENGTH} characters`,
      );
    }
    return this.key;
  }
}
