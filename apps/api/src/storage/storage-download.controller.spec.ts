import { parseRange } from './storage-download.controller';

describe('download Range header', () => {
  it.each([
    ['bytes=0-0', 10, { start: 0, end: 0 }],
    ['bytes=2-5', 10, { start: 2, end: 5 }],
    ['bytes=4-', 10, { start: 4, end: 9 }],
    ['bytes=5-100', 10, { start: 5, end: 9 }],
    ['bytes=-3', 10, { start: 7, end: 9 }],
    ['bytes=-30', 10, { start: 0, end: 9 }],
  ])('%s of %i bytes', (header, size, range) => {
    expect(parseRange(header, size)).toEqual(range);
  });

  it.each([undefined, '', 'bytes=', 'bytes=-', 'bytes=10-12', 'bytes=5-2', 'bytes=-0', 'bytes=0-1,3-4', 'items=0-1', 'bytes=abc'])('serves the whole object for %j', (header) => {
    expect(parseRange(header, 10)).toBeNull();
  });
});
