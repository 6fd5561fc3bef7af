import { generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import {
  EntitlementToIssue, featureSet, issueLicenseKey, issuerKeyId, LicenseKeyError, LicenseKeyProblem, parseIssuerKeys, publicKeyText, verifyLicenseKey,
} from './license-key';

const NOW = new Date('2026-11-23T12:00:00Z');
const issuer = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const trusted = parseIssuerKeys(publicKeyText(issuer.publicKey));

const entitlement: EntitlementToIssue = {
  license_id: 'a1b2c3d4e5f60718293a4b5c6d7e8f90', license_type: 'Per Concurrent Session', sku: 'WS-ENT', limit: 10,
  expiration: new Date('2027-11-23T00:00:00Z'), issued_at: new Date('2026-11-01T00:00:00Z'), issued_to: 'Example Corp',
  features: featureSet(['session_casting', 'session_staging']),
};

function problemOf(key: string, issuers = trusted): LicenseKeyProblem | 'none' {
  try {
    verifyLicenseKey(key, issuers, NOW);
    return 'none';
  } catch (err) {
    if (err instanceof LicenseKeyError) return err.problem;
    throw err;
  }
}

/** A key whose payload was edited after signing (or signed over an arbitrary payload by `key`). */
function withPayload(payload: Record<string, unknown>, signer: KeyObject | null = null): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  if (!signer) return `wsl1.${body}.${issueLicenseKey(entitlement, issuer.privateKey).split('.')[2]}`;
  return `wsl1.${body}.${sign(null, Buffer.from(`wsl1.${body}`), signer).toString('base64url')}`;
}

function payloadOf(key: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(key.split('.')[1], 'base64url').toString()) as Record<string, unknown>;
}

describe('license keys', () => {
  it('round-trips an entitlement signed by a trusted issuer', () => {
    const verified = verifyLicenseKey(issueLicenseKey(entitlement, issuer.privateKey), trusted, NOW);
    expect(verified).toEqual({ ...entitlement, issuer_key_id: issuerKeyId(issuer.publicKey) });
    expect(verified.features.session_casting).toBe(true);
    expect(verified.features.saml).toBe(false);
  });

  it('tells a tampered key (content changed after signing) by its signature', () => {
    const key = issueLicenseKey(entitlement, issuer.privateKey);
    expect(problemOf(withPayload({ ...payloadOf(key), limit: 1000 }))).toBe('bad_signature');
    const [prefix, body, signature] = key.split('.');
    const flipped = signature[5] === 'A' ? 'B' : 'A';
    expect(problemOf(`${prefix}.${body}.${signature.slice(0, 5)}${flipped}${signature.slice(6)}`)).toBe('bad_signature');
  });

  it('tells a key from an issuer that is not trusted, also one that claims a trusted issuer key id', () => {
    expect(problemOf(issueLicenseKey(entitlement, other.privateKey))).toBe('unknown_issuer');
    const claimed = withPayload({ ...payloadOf(issueLicenseKey(entitlement, issuer.privateKey)), limit: 99 }, other.privateKey);
    expect(problemOf(claimed)).toBe('bad_signature');
    expect(problemOf(issueLicenseKey(entitlement, issuer.privateKey), [])).toBe('unknown_issuer');
  });

  it('verifies with any of several configured issuer keys (rotation)', () => {
    const both = parseIssuerKeys(`${publicKeyText(other.publicKey)}, ${publicKeyText(issuer.publicKey)}`);
    expect(problemOf(issueLicenseKey(entitlement, issuer.privateKey), both)).toBe('none');
    expect(problemOf(issueLicenseKey(entitlement, other.privateKey), both)).toBe('none');
  });

  it('refuses an expired key, and skips the expiry check when asked (a stored license is judged per use)', () => {
    const expired = issueLicenseKey({ ...entitlement, expiration: new Date('2026-11-23T11:59:59Z') }, issuer.privateKey);
    expect(problemOf(expired)).toBe('expired');
    expect(verifyLicenseKey(expired, trusted, null).license_id).toBe(entitlement.license_id);
  });

  it.each([
    ['empty', ''],
    ['another prefix', 'wsl2.e30.AAAA'],
    ['two parts', 'wsl1.e30'],
    ['not base64url', 'wsl1.e30.a+b/'],
    ['not JSON', `wsl1.${Buffer.from('nope').toString('base64url')}.AAAA`],
    ['a JSON array', `wsl1.${Buffer.from('[1]').toString('base64url')}.AAAA`],
    ['no issuer key id', `wsl1.${Buffer.from('{"limit":1}').toString('base64url')}.AAAA`],
    ['too long', `wsl1.${'A'.repeat(20_000)}.AAAA`],
  ])('refuses a malformed key: %s', (_what, key) => {
    expect(problemOf(key)).toBe('malformed');
  });

  it.each([
    ['limit not an integer', { limit: 'ten' }],
    ['limit zero', { limit: 0 }],
    ['expiration not a date', { expiration: 'soon' }],
    ['a feature not a boolean', { features: { saml: 'yes' } }],
    ['no license_id', { license_id: '' }],
  ])('refuses a correctly signed payload with bad content: %s', (_what, change) => {
    const payload = { ...payloadOf(issueLicenseKey(entitlement, issuer.privateKey)), ...change };
    expect(problemOf(withPayload(payload, issuer.privateKey))).toBe('malformed');
  });

  it('ignores feature flags it does not know (a newer issuer) instead of refusing the key', () => {
    const payload = payloadOf(issueLicenseKey(entitlement, issuer.privateKey));
    const key = withPayload({ ...payload, features: { ...(payload.features as object), teleportation: true } }, issuer.privateKey);
    expect(verifyLicenseKey(key, trusted, NOW).features).toEqual(entitlement.features);
  });

  it('reads issuer public keys as raw base64, SPKI DER base64 and PEM (with \\n escapes), and names a bad entry', () => {
    const id = issuerKeyId(issuer.publicKey);
    const pem = issuer.publicKey.export({ format: 'pem', type: 'spki' }).toString();
    const der = issuer.publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
    const raw = publicKeyText(issuer.publicKey);
    expect(parseIssuerKeys(`${raw},${der},${pem.trim().replace(/\n/g, '\\n')}`).map((k) => k.id)).toEqual([id, id, id]);
    expect(parseIssuerKeys(Buffer.from(raw, 'base64').toString('base64url')).map((k) => k.id)).toEqual([id]);
    expect(parseIssuerKeys('')).toEqual([]);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
    expect(() => parseIssuerKeys(`${raw},${rsa.export({ format: 'der', type: 'spki' }).toString('base64')}`)).toThrow(/^LICENSE_PUBLIC_KEYS entry 2 is not an Ed25519 public key \(base64 of \d+ bytes; expected 32/);
    expect(() => parseIssuerKeys(rsa.export({ format: 'pem', type: 'spki' }).toString())).toThrow('LICENSE_PUBLIC_KEYS entry 1 is not an Ed25519 public key (a rsa key)');
    expect(() => parseIssuerKeys('abc')).toThrow(/entry 1 .*base64 of 2 bytes/);
  });
});
