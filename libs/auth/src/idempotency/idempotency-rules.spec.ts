import { ApiError, ErrorCode } from '@ws/common';
import { OPERATIONS } from '../operations';
import { canonicalJson, isFinalAnswer, isIdempotent, parseIdempotencyKey, requestFingerprint } from './idempotency-rules';

describe('Idempotency-Key rules', () => {
  it('marks exactly the creating operations', () => {
    const marked = Object.keys(OPERATIONS).filter((name) => isIdempotent(name as keyof typeof OPERATIONS)).sort();
    expect(marked).toEqual(['activate', 'create_cast_config', 'create_session_token', 'create_staging_config', 'create_user', 'create_webhook', 'join_workspace', 'request_workspace', 'update_egress_credential']);
  });

  it('takes 1-255 visible ASCII characters and refuses the rest naming the header', () => {
    for (const key of ['a', 'x'.repeat(255), '0b7c3e1a-6f2d-4c1b-9a44-2f4d5e6a7b8c', '!~{}"\\']) expect(parseIdempotencyKey(key)).toBe(key);
    for (const bad of ['', 'x'.repeat(256), 'has space', 'tab\there', 'é', 'nul\u0000', ['a', 'b']]) {
      let error: unknown;
      try {
        parseIdempotencyKey(bad);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).code).toBe(ErrorCode.InvalidRequest);
      expect((error as ApiError).message).toMatch(/^Idempotency-Key /);
    }
  });

  it('fingerprints bodies by canonical JSON: key order and credentials do not count, values do', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: null }], c: 'x' } })).toBe('{"a":{"c":"x","d":[2,{"e":null,"f":1}]},"b":1}');
    const body = { target_user: { username: 'ada', first_name: 'Ada' } };
    const reordered = { target_user: { first_name: 'Ada', username: 'ada' } };
    expect(requestFingerprint({ api_key: 'k', api_key_secret: 's', ...body })).toBe(requestFingerprint(reordered));
    expect(requestFingerprint(body)).toMatch(/^[0-9a-f]{64}$/);
    expect(requestFingerprint(body)).not.toBe(requestFingerprint({ target_user: { username: 'ada', first_name: 'Ada ' } }));
    expect(requestFingerprint({ n: 1 })).not.toBe(requestFingerprint({ n: '1' }));
  });

  it('stores successes and final refusals; answers that say "later" are not stored', () => {
    for (const status of [200, 400, 403, 404]) expect(isFinalAnswer(status)).toBe(true);
    expect(isFinalAnswer(409, ErrorCode.Conflict)).toBe(true);
    expect(isFinalAnswer(409, ErrorCode.InvalidState)).toBe(false);
    for (const status of [429, 500, 503]) expect(isFinalAnswer(status)).toBe(false);
  });
});
