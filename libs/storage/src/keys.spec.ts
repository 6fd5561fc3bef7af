import { InvalidKeyError } from './object-store';
import { FileObjectStore } from './file-store';
import { validateKey, validatePrefix } from './keys';

describe('object keys', () => {
  it.each(['a', 'profiles/u1/img-2/home.tar', 'recordings/2026/11/seg_0001.rfb', 'x=1+y@z', 'A.b_c-d'])('accepts %s', (key) => {
    expect(validateKey(key)).toBe(key);
  });

  it.each(['', '/abs', 'a/', 'a//b', '.', '..', '../x', 'a/../b', 'a/./b', '.meta/x', '.tmp', 'a\\b', 'a b', 'ü', 'a\0b', 'x'.repeat(1025)])('refuses %j', (key) => {
    expect(() => validateKey(key)).toThrow(InvalidKeyError);
  });

  it('takes prefixes that end in a slash, and the empty prefix', () => {
    expect(validatePrefix('')).toBe('');
    expect(validatePrefix('profiles/')).toBe('profiles/');
    expect(validatePrefix('profiles/u')).toBe('profiles/u');
    expect(() => validatePrefix('../')).toThrow(InvalidKeyError);
    expect(() => validatePrefix('/')).toThrow(InvalidKeyError);
  });

  it('resolves file keys strictly inside the root', () => {
    const store = new FileObjectStore('/srv/data/storage', { publicBaseUrl: 'http://127.0.0.1:8080' });
    expect(store.pathOf('a/b.bin')).toBe('/srv/data/storage/a/b.bin');
    for (const key of ['../storage2/x', 'a/../../x', '/srv/data/storage/x']) expect(() => store.pathOf(key)).toThrow(InvalidKeyError);
  });
});
