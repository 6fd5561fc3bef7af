import { Injectable } from '@nestjs/common';
import { ApiError, AppConfig, ErrorCode, SecretCipher } from '@ws/common';
import type { EgressCredential } from './egress.entities';

/** The secret columns of egress_credentials: entity property → column (the associated data names the column). */
export const SEALED_SECRET_COLUMNS = { password: 'password', vpnPrivateKey: 'vpn_private_key', meshKey: 'mesh_key', customCredential: 'custom_credential' } as const;
export type SealedSecretProperty = keyof typeof SEALED_SECRET_COLUMNS;

/** Kept as they are: migrations/1795500000000-EncryptEgressSecrets.ts seals the rows stored before with the same. */
const PURPOSE = { info: 'egress credential secrets v1', what: "egress credentials' secrets", one: 'egress credential secret' };
const boundTo = (credentialId: string, property: SealedSecretProperty) => `egress_credentials ${credentialId} ${SEALED_SECRET_COLUMNS[property]}`;

/**
 * Egress credentials' secrets at rest (docs/decisions/egress.md, "Secrets at rest"): sealed with @ws/common's
 * SecretCipher under SERVER_CREDENTIALS_KEY, each bound to its credential id and column. Writes seal, the worker's
 * provision opens (`reveal`); answers and listings only mask, so they never open a secret.
 */
@Injectable()
export class EgressSecrets {
  private readonly cipher: SecretCipher;

  constructor(config: AppConfig) {
    this.cipher = new SecretCipher(config.SERVER_CREDENTIALS_KEY, PURPOSE);
  }

  /** The stored form of a new secret; a 400 naming the key setting when none is set. */
  seal(credentialId: string, property: SealedSecretProperty, plaintext: string): string {
    if (!this.cipher.configured) {
      throw new ApiError(ErrorCode.InvalidRequest, `SERVER_CREDENTIALS_KEY is not set: egress credentials' secrets are stored only encrypted, so the operator must set a key of at least 32 characters first`);
    }
    return this.cipher.encrypt(plaintext, boundTo(credentialId, property));
  }

  /** A copy of the credential with its secrets in clear; a SecretCipherError when one does not open (no key, another key, altered). */
  reveal(credential: EgressCredential): EgressCredential {
    const copy = Object.assign(Object.create(Object.getPrototypeOf(credential) as object) as EgressCredential, credential);
    for (const property of Object.keys(SEALED_SECRET_COLUMNS) as SealedSecretProperty[]) {
      const stored = credential[property];
      copy[property] = stored === null ? null : this.cipher.decrypt(stored, boundTo(credential.id, property));
    }
    return copy;
  }
}
