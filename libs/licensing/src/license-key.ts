import { createHash, createPrivateKey, createPublicKey, KeyObject, sign, verify } from 'node:crypto';

/**
 * Activation keys: `wsl1.<base64url(JSON payload)>.<base64url(Ed25519 signature)>`. The signature covers the
 * ASCII text `wsl1.<payload part>`, so the version prefix is signed too. The payload names the issuer key it was
 * signed with (`issuer_key_id`, a fingerprint of the public key): a key from an issuer this deployment does not
 * trust is told apart from a tampered one, and several configured keys (rotation) cost one verification.
 */
export const LICENSE_KEY_PREFIX = 'wsl1';

/** The spec's feature flags, in its order. */
export const LICENSE_FEATURES = [
  'auto_scaling', 'branding', 'session_staging', 'session_casting', 'log_forwarding', 'developer_api', 'inject_ssh_keys',
  'saml', 'ldap', 'session_sharing', 'login_banner', 'url_categorization', 'usage_limit',
] as const;
export type LicenseFeature = (typeof LICENSE_FEATURES)[number];
export type LicenseFeatures = Record<LicenseFeature, boolean>;

export function isLicenseFeature(name: string): name is LicenseFeature {
  return (LICENSE_FEATURES as readonly string[]).includes(name);
}

/** Every flag off, then the named ones on. */
export function featureSet(enabled: Iterable<LicenseFeature>): LicenseFeatures {
  const features = Object.fromEntries(LICENSE_FEATURES.map((f) => [f, false])) as LicenseFeatures;
  for (const name of enabled) features[name] = true;
  return features;
}

/** What the issuer signed: the entitlement. */
export interface LicenseEntitlement {
  license_id: string;
  license_type: string;
  sku: string;
  /** The most concurrent workspaces the entitlement allows; activation applies this many or fewer (seats). */
  limit: number;
  expiration: Date;
  issued_at: Date;
  /** Empty when the issuer left it to the activation (see LicensingService.activate). */
  issued_to: string;
  features: LicenseFeatures;
  issuer_key_id: string;
}

/** Why a key was refused; the message says it in words an operator can act on. */
export type LicenseKeyProblem = 'malformed' | 'unknown_issuer' | 'bad_signature' | 'expired';

export class LicenseKeyError extends Error {
  constructor(
    readonly problem: LicenseKeyProblem,
    message: string,
  ) {
    super(message);
    this.name = 'LicenseKeyError';
  }
}

/** A trusted issuer key with its fingerprint. */
export interface IssuerKey {
  id: string;
  key: KeyObject;
}

const MAX_KEY_LENGTH = 16 * 1024;
const MAX_TEXT = 256;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** An Ed25519 public key as SPKI DER: a 12-byte header and the 32-byte key. */
const ED25519_SPKI_DER_BYTES = 44;

/** The issuer key id: the first 16 hex characters of SHA-256 over the raw 32-byte public key. */
export function issuerKeyId(publicKey: KeyObject): string {
  return createHash('sha256').update(rawPublicKey(publicKey)).digest('hex').slice(0, 16);
}

/** The raw 32 bytes of an Ed25519 public key, base64: the form LICENSE_PUBLIC_KEYS takes. */
export function publicKeyText(publicKey: KeyObject): string {
  return rawPublicKey(publicKey).toString('base64');
}

function rawPublicKey(publicKey: KeyObject): Buffer {
  const jwk = publicKey.export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error('not an Ed25519 public key');
  return Buffer.from(jwk.x, 'base64url');
}

/**
 * The issuer keys of LICENSE_PUBLIC_KEYS: comma-separated, each the raw 32-byte key in base64 (or base64url),
 * an SPKI DER in base64, or a PEM (`\n` escapes allowed, as environment files often hold one line). Throws
 * naming the entry that is not an Ed25519 public key.
 */
export function parseIssuerKeys(value: string): IssuerKey[] {
  const entries = value.replace(/\\n/g, '\n').split(',').map((e) => e.trim()).filter(Boolean);
  return entries.map((entry, index) => {
    let key: KeyObject;
    try {
      key = parsePublicKey(entry);
    } catch (err) {
      throw new Error(`LICENSE_PUBLIC_KEYS entry ${index + 1} is not an Ed25519 public key (${(err as Error).message})`);
    }
    return { id: issuerKeyId(key), key };
  });
}

function parsePublicKey(entry: string): KeyObject {
  let key: KeyObject;
  if (entry.includes('-----BEGIN')) key = createPublicKey(entry);
  else {
    const bytes = Buffer.from(entry, /[-_]/.test(entry) ? 'base64url' : 'base64');
    if (bytes.length === 32) key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: bytes.toString('base64url') }, format: 'jwk' });
    else if (bytes.length === ED25519_SPKI_DER_BYTES) key = createPublicKey({ key: bytes, format: 'der', type: 'spki' });
    else throw new Error(`base64 of ${bytes.length} bytes; expected 32 (the raw key) or ${ED25519_SPKI_DER_BYTES} (SPKI DER), or a PEM`);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`a ${key.asymmetricKeyType ?? 'symmetric'} key`);
  return key;
}

/** An Ed25519 private key from PEM (PKCS#8) text: the issuer's signing key. */
export function parseIssuerPrivateKey(pem: string): KeyObject {
  const key = createPrivateKey(pem);
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`the private key is ${key.asymmetricKeyType ?? 'not asymmetric'}, not Ed25519`);
  return key;
}

/** What `license issue` signs; the issuer key id is derived from the private key. */
export type EntitlementToIssue = Omit<LicenseEntitlement, 'issuer_key_id'>;

export function issueLicenseKey(entitlement: EntitlementToIssue, privateKey: KeyObject): string {
  const publicKey = createPublicKey(privateKey);
  const payload = {
    license_id: entitlement.license_id,
    license_type: entitlement.license_type,
    sku: entitlement.sku,
    limit: entitlement.limit,
    expiration: entitlement.expiration.toISOString(),
    issued_at: entitlement.issued_at.toISOString(),
    issued_to: entitlement.issued_to,
    features: entitlement.features,
    issuer_key_id: issuerKeyId(publicKey),
  };
  const signed = `${LICENSE_KEY_PREFIX}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return `${signed}.${sign(null, Buffer.from(signed), privateKey).toString('base64url')}`;
}

/**
 * The entitlement of a key, if one of `issuers` signed exactly this text and it has not expired at `now`
 * (`now: null` skips the expiry check: a stored license is re-verified on load and its expiry judged per use).
 * Checks in the order an operator fixes them: shape, issuer, signature, content, expiry.
 */
export function verifyLicenseKey(text: string, issuers: readonly IssuerKey[], now: Date | null): LicenseEntitlement {
  const key = text.trim();
  if (key.length > MAX_KEY_LENGTH) throw malformed(`it is longer than ${MAX_KEY_LENGTH} characters`);
  const parts = key.split('.');
  if (parts.length !== 3 || parts[0] !== LICENSE_KEY_PREFIX || !BASE64URL.test(parts[1]) || !BASE64URL.test(parts[2])) {
    throw malformed(`expected ${LICENSE_KEY_PREFIX}.<payload>.<signature>`);
  }
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
  } catch {
    throw malformed('its payload is not base64url JSON');
  }
  if (!isRecord(payload)) throw malformed('its payload is not a JSON object');
  const keyId = payload.issuer_key_id;
  if (typeof keyId !== 'string' || !keyId) throw malformed('its payload names no issuer_key_id');
  if (issuers.length === 0) {
    throw new LicenseKeyError('unknown_issuer', 'Invalid activation_key: this deployment trusts no license issuer (LICENSE_PUBLIC_KEYS is empty)');
  }
  const issuer = issuers.find((i) => i.id === keyId);
  if (!issuer) {
    throw new LicenseKeyError('unknown_issuer', `Invalid activation_key: it was signed by issuer key ${keyId.slice(0, 32)}, which this deployment does not trust (LICENSE_PUBLIC_KEYS)`);
  }
  const signature = Buffer.from(parts[2], 'base64url');
  if (signature.length !== 64 || !verify(null, Buffer.from(`${parts[0]}.${parts[1]}`), issuer.key, signature)) {
    throw new LicenseKeyError('bad_signature', 'Invalid activation_key: its signature does not match its content (the key was altered or damaged)');
  }
  const entitlement = readEntitlement(payload, keyId);
  if (now && entitlement.expiration.getTime() <= now.getTime()) {
    throw new LicenseKeyError('expired', `Invalid activation_key: the license ${entitlement.license_id} expired at ${entitlement.expiration.toISOString()}`);
  }
  return entitlement;
}

/** The signed payload's fields, checked: an issuer with a bug must not hand us a limit of "ten". */
function readEntitlement(payload: Record<string, unknown>, keyId: string): LicenseEntitlement {
  const text = (field: string, allowEmpty = false): string => {
    const value = payload[field];
    if (typeof value !== 'string' || (!allowEmpty && !value.trim()) || value.length > MAX_TEXT) {
      throw malformed(`${field} must be a${allowEmpty ? '' : ' non-empty'} string of at most ${MAX_TEXT} characters`);
    }
    return value.trim();
  };
  const date = (field: string): Date => {
    const value = payload[field];
    const parsed = typeof value === 'string' ? new Date(value) : null;
    if (!parsed || Number.isNaN(parsed.getTime())) throw malformed(`${field} must be an ISO 8601 date`);
    return parsed;
  };
  const limit = payload.limit;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > 1_000_000) {
    throw malformed('limit must be an integer from 1 to 1000000');
  }
  const flags = payload.features;
  if (!isRecord(flags)) throw malformed('features must be an object of booleans');
  const enabled: LicenseFeature[] = [];
  for (const [name, on] of Object.entries(flags)) {
    if (typeof on !== 'boolean') throw malformed(`features.${name} must be a boolean`);
    // A flag this version does not know (a newer issuer's) grants nothing here; it is not an error.
    if (on && isLicenseFeature(name)) enabled.push(name);
  }
  return {
    license_id: text('license_id'),
    license_type: text('license_type'),
    sku: text('sku'),
    limit,
    expiration: date('expiration'),
    issued_at: date('issued_at'),
    issued_to: text('issued_to', true),
    features: featureSet(enabled),
    issuer_key_id: keyId,
  };
}

function malformed(why: string): LicenseKeyError {
  return new LicenseKeyError('malformed', `Invalid activation_key: malformed, ${why}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
