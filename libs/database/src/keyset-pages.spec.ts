import { ApiError } from '@ws/common';
import { creationOrder, decodeCursor, DEFAULT_PAGE_LIMIT, encodeCursor, inIdOrder, KeysetList, pageOf } from './keyset-pages';

const USERS: KeysetList = { name: 'users', from: 'users u', keys: creationOrder('u') };
const IMAGES: KeysetList = { name: 'images', from: 'images i', keys: creationOrder('i') };
const AT = '2026-11-27T22:30:01.123456Z';
const ID = '0b7e3f5c-2a4d-4c1e-9f00-123456789abc';

const refusal = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err.message;
    throw err;
  }
  throw new Error('not refused');
};

describe('keyset cursors', () => {
  it('round-trip the key values of their list', () => {
    const cursor = encodeCursor(USERS, [AT, ID]);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor, USERS)).toEqual([AT, ID]);
  });

  it("refuse another list's cursor, naming the list", () => {
    expect(refusal(() => decodeCursor(encodeCursor(IMAGES, [AT, ID]), USERS))).toBe('cursor belongs to another list, not users');
  });

  it.each([
    ['not base64url', 'a+b/c=='],
    ['not JSON', Buffer.from('{nope').toString('base64url')],
    ['not an array', Buffer.from('{"a":1}').toString('base64url')],
    ['too few keys', Buffer.from(JSON.stringify(['users', AT])).toString('base64url')],
    ['a number for a key', Buffer.from(JSON.stringify(['users', AT, 5])).toString('base64url')],
    ['a timestamp without microseconds', encodeCursor(USERS, ['2026-11-27T22:30:01Z', ID])],
    ['SQL for an id', encodeCursor(USERS, [AT, "x'; DROP TABLE users; --"])],
  ])('refuse a malformed cursor (%s) with a 400 naming cursor', (_what, cursor) => {
    expect(refusal(() => decodeCursor(cursor, USERS))).toBe('cursor is not a cursor this service issued');
  });

  it('ask for a page only when limit or cursor is sent; a cursor alone pages by the default size', () => {
    expect(pageOf({}, USERS)).toBeNull();
    expect(pageOf({ limit: 5 }, USERS)).toEqual({ limit: 5, after: null });
    expect(pageOf({ cursor: encodeCursor(USERS, [AT, ID]) }, USERS)).toEqual({ limit: DEFAULT_PAGE_LIMIT, after: [AT, ID] });
  });

  it('put loaded rows in the order of the page ids, leaving out rows gone in between', () => {
    expect(inIdOrder([{ id: 'b' }, { id: 'a' }, { id: 'x' }], ['a', 'b', 'c'])).toEqual([{ id: 'a' }, { id: 'b' }]);
  });
});
