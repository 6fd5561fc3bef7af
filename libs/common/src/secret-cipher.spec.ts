import { SecretCipher, SecretCipherError } from './secret-cipher';

const PURPOSE = { info: 'test secrets v1', what: 'test secrets', one: 'test secret' };

describe('SecretCipher', () => {
  const key = 'k'.repeat(32);

  it('round-trips, never stores the plaintext, and uses a fresh IV each time', () => {
    const cipher = new SecretCipher(key, PURPOSE);
    const stored = cipher.encrypt('hunter2', 'row-1 password');
    expect(SecretCipher.isSealed(stored)).toBe(true);
    expect(stored).not.toContain('hunter2');
    expect(cipher.encrypt('hunter2', 'row-1 password')).not.toBe(stored);
    expect(cipher.decrypt(stored, 'row-1 password')).toBe('hunter2');
    expect(cipher.decrypt(cipher.encrypt('', 'x'), 'x')).toBe('');
    expect(cipher.decrypt(cipher.encrypt('ключ 🔑', 'x'), 'x')).toBe('ключ 🔑');
  });

  it('binds the value to its place, its key and its purpose, and refuses an altered value', () => {
    const cipher = new SecretCipher(key, PURPOSE);
    const stored = cipher.encrypt('hunter2', 'row-1 password');
    expect(() => cipher.decrypt(stored, 'row-2 password')).toThrow(SecretCipherError);
    expect(() => cipher.decrypt(stored, 'row-1 mesh_key')).toThrow(/does not decrypt with SERVER_CREDENTIALS_KEY/);
    expect(() => new SecretCipher('z'.repeat(32), PURPOSE).decrypt(stored, 'row-1 password')).toThrow(/does not decrypt/);
    expect(() => new SecretCipher(key, { ...PURPOSE, info: 'other v1' }).decrypt(stored, 'row-1 password')).toThrow(/does not decrypt/);
    const [v, iv, tag, body] = stored.split(':');
    const flipped = Buffer.from(body, 'base64url');
    flipped[0] ^= 1;
    expect(() => cipher.decrypt([v, iv, tag, flipped.toString('base64url')].join(':'), 'row-1 password')).toThrow(/does not decrypt/);
  });

  it('tells a sealed value from a plaintext one', () => {
    expect(SecretCipher.isSealed('plain')).toBe(false);
    expect(SecretCipher.isSealed('v1:a:b:c')).toBe(false);
    expect(SecretCipher.isSealed('yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=')).toBe(false);
    expect(() => new SecretCipher(key, PURPOSE).decrypt('plain', 'x')).toThrow(/not a stored test secret/);
  });

  it('refuses short keys, and sealing or opening without a key, naming the setting', () => {
    expect(() => new SecretCipher('short', PURPOSE)).toThrow(/SERVER_CREDENTIALS_KEY must be empty or at least 32/);
    const none = new SecretCipher('', PURPOSE);
    expect(none.configured).toBe(false);
    expect(() => none.encrypt('pw', 'x')).toThrow(/SERVER_CREDENTIALS_KEY is not set: test secrets are stored only encrypted/);
    expect(() => none.decrypt('v1:a:b:c', 'x')).toThrow(SecretCipherError);
  });
});
