import { Webhook as StandardWebhook } from 'standardwebhooks';
import { webhookRetryDelayMs } from './webhook-dispatcher.service';
import { signatures } from './webhook-sender';
import { newWebhookSecret, WebhookSecretStore } from './webhook-secrets';
import { webhookAddressPolicy } from './webhook-address';

describe('webhook delivery rules', () => {
  it('backs off 4 times longer per failure, at most 6 hours, about a day over the default 11 attempts', () => {
    expect([1, 2, 3, 4].map((n) => webhookRetryDelayMs(5000, n))).toEqual([5000, 20_000, 80_000, 320_000]);
    expect(webhookRetryDelayMs(5000, 20)).toBe(6 * 3600_000);
    const total = Array.from({ length: 10 }, (_, i) => webhookRetryDelayMs(5000, i + 1)).reduce((a, b) => a + b, 0);
    expect(total / 3600_000).toBeGreaterThan(20);
    expect(total / 3600_000).toBeLessThan(30);
  });

  it('signs with every secret given; a receiver holding either one verifies', () => {
    const [a, b] = [newWebhookSecret(), newWebhookSecret()];
    const body = JSON.stringify({ type: 'user.created', timestamp: new Date().toISOString(), data: { user_id: 'x' } });
    const now = new Date();
    const header = signatures([a, b], 'msg_1', now, body);
    expect(header.split(' ')).toHaveLength(2);
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': header };
    expect(new StandardWebhook(a).verify(body, headers)).toMatchObject({ type: 'user.created' });
    expect(new StandardWebhook(b).verify(body, headers)).toMatchObject({ type: 'user.created' });
    expect(() => new StandardWebhook(newWebhookSecret()).verify(body, headers)).toThrow();
  });

  it('keeps secrets encrypted when a key is set, readable either way', () => {
    const secret = newWebhookSecret();
    const sealed = new WebhookSecretStore('k'.repeat(32)).seal(secret, 'id-1');
    expect(sealed).not.toContain(secret);
    expect(new WebhookSecretStore('k'.repeat(32)).open(sealed, 'id-1')).toBe(secret);
    expect(() => new WebhookSecretStore('k'.repeat(32)).open(sealed, 'id-2')).toThrow();
    expect(new WebhookSecretStore('').open(new WebhookSecretStore('').seal(secret, 'id-1'), 'id-1')).toBe(secret);
  });

  it('refuses loopback, private and link-local receivers unless allowed; metadata always', () => {
    const strict = webhookAddressPolicy(false);
    const lax = webhookAddressPolicy(true);
    for (const ip of ['127.0.0.1', '10.0.0.1', '192.168.1.1', '169.254.1.1', '::1', 'fe80::1', '::ffff:127.0.0.1']) {
      expect(strict.checkAddress(ip)).toMatchObject({ allowed: false, reason: expect.stringMatching(/WEBHOOK_ALLOW_PRIVATE_ADDRESSES/) });
      expect(lax.checkAddress(ip).allowed).toBe(true);
    }
    for (const ip of ['169.254.169.254', 'fd00:ec2::254', '0.0.0.0']) expect(lax.checkAddress(ip)).toMatchObject({ allowed: false, reason: expect.stringMatching(/never a webhook receiver/) });
    expect(strict.checkAddress('93.184.216.34').allowed).toBe(true);
  });
});
