import { InvalidKeyError } from './object-store';

/** One path segment: no leading dot (so ".", "..", and the file store's own .tmp/.meta can never be named). */
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._=+@-]{0,254}$/;
const MAX_KEY_LENGTH = 1024;

/**
 * Throws InvalidKeyError unless `key` is a relative path of safe segments ("profiles/u1/img2/home.tar").
 * The same rule holds for both backends, so a key that works on one works on the other, and none can leave the
 * file store's root.
 */
export function validateKey(key: string): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) throw new InvalidKeyError(`Invalid object key: must be 1-${MAX_KEY_LENGTH} characters`);
  const segments = key.split('/');
  for (const segment of segments) {
    if (!SEGMENT.test(segment)) throw new InvalidKeyError(`Invalid object key ${JSON.stringify(key)}: segments are [A-Za-z0-9._=+@-], not starting with a dot, not empty`);
  }
  return key;
}

/** A list prefix: a key, or a key's beginning ("profiles/", "profiles/u1"); the empty prefix lists everything. */
export function validatePrefix(prefix: string): string {
  if (prefix === '') return prefix;
  const trimmed = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  validateKey(trimmed);
  return prefix;
}
