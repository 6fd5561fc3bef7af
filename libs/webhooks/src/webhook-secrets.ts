import { randomBytes } from 'node:crypto';
import { ServerCredentialCipher } from '@ws/images';

const PLAIN = 'plain:';

/** A new signing secret in Standard Webhooks' form: `whsec_` and 24 random bytes in base64. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/**
 * Keeps signing secrets at rest. With SERVER_CREDENTIALS_KEY set they are encrypted with the shared AES-256-GCM
 * helper (@ws/images ServerCredentialCipher), bound to the webhook's id; without it they are kept as written
 * (`plain:`), because the worker must sign with them and a key stored beside the database protects nothing
 * (docs/decisions/webhooks.md). A secret stored either way is read back either way, so setting the key later
 * encrypts the secrets written from then on.
 */
export class WebhookSecretStore {
  private readonly cipher: ServerCredentialCipher;

  constructor(key: string) {
    this.cipher = new ServerCredentialCipher(key);
  }

  seal(secret: string, webhookId: string): string {
    return this.cipher.configured ? this.cipher.encrypt(secret, `webhook:${webhookId}`) : `${PLAIN}${secret}`;
  }

  open(stored: string, webhookId: string): string {
    return stored.startsWith(PLAIN) ? stored.slice(PLAIN.length) : this.cipher.decrypt(stored, `webhook:${webhookId}`);
  }
}
