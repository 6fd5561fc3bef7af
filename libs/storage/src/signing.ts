import { createHmac, timingSafeEqual } from 'node:crypto';
import { validateKey } from './keys';

/** The HMAC of a file:// download link: binds the key and the expiry (unix seconds) together. */
export function signDownload(secret: Buffer, key: string, expiresAt: number): string {
  return createHmac('sha256', secret).update(`GET\n${key}\n${expiresAt}`).digest('hex');
}

export type DownloadCheck = { ok: true } | { ok: false; reason: 'expired' | 'invalid' };

/**
 * Checks a link's expiry and signature (constant-time compare). `expires` and `signature` are the raw query
 * values; anything malformed is 'invalid'.
 */
export function checkDownload(secret: Buffer, key: string, expires: unknown, signature: unknown, nowSeconds = Math.floor(Date.now() / 1000)): DownloadCheck {
  if (typeof expires !== 'string' || !/^\d{1,12}$/.test(expires) || typeof signature !== 'string' || !/^[0-9a-f]{64}$/.test(signature)) return { ok: false, reason: 'invalid' };
  try {
    validateKey(key);
  } catch {
    return { ok: false, reason: 'invalid' };
  }
  const expected = Buffer.from(signDownload(secret, key, Number(expires)), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) return { ok: false, reason: 'invalid' };
  // Checked after the signature, so an attacker learns nothing about expiry from a forged link.
  if (Number(expires) < nowSeconds) return { ok: false, reason: 'expired' };
  return { ok: true };
}

/** The path part of a download link for `key`: each segment percent-encoded (segments are already url-safe but for + and @). */
export function downloadPath(key: string): string {
  return `/api/storage/${key.split('/').map(encodeURIComponent).join('/')}`;
}
