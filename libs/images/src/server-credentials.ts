import { SecretCipher, SecretCipherError } from '@ws/common';

/** A stored server credential that cannot be read (the shared SecretCipher's error). */
export { SecretCipherError as ServerCredentialError };

/**
 * Encrypts server images' passwords at rest with @ws/common's SecretCipher (AES-256-GCM under SERVER_CREDENTIALS_KEY;
 * without a key, a server image can still be made, but not with a stored password). Callers bind the value to the
 * image id (or the workspace id), so a ciphertext copied onto another row does not decrypt.
 */
export class ServerCredentialCipher extends SecretCipher {
  constructor(secret: string) {
    super(secret, { info: 'server image credentials v1', what: 'server image passwords', one: 'server credential' });
  }
}
