import { referrerAllowed } from './cast-launch.service';
import { parseUtcTimestamp } from './casting.service';

describe('referrerAllowed', () => {
  it.each([
    [[], undefined, true],
    [[], 'not a url', true],
    [['good.test'], undefined, false],
    [['good.test'], 'not a url', false],
    [['good.test'], 'https://good.test/page', true],
    [['good.test'], 'https://GOOD.test:8443/page', true],
    [['good.test'], 'https://good.test.evil.test/', false],
    [['good.test'], 'https://sub.good.test/', false],
    [['*.good.test'], 'https://sub.good.test/', true],
    [['*.good.test'], 'https://good.test/', false],
    [['*.good.test'], 'https://evilgood.test/', false],
    [['good.test:8443'], 'https://good.test:8443/', true],
    [['good.test:8443'], 'https://good.test/', false],
  ])('%j with Referer %s → %s', (allowed, referer, expected) => {
    expect(referrerAllowed(allowed, referer)).toBe(expected);
  });
});

describe('parseUtcTimestamp', () => {
  it('reads the spec timestamp as UTC and honours an explicit zone', () => {
    expect(parseUtcTimestamp('2030-01-02 03:04:05', 'valid_until').toISOString()).toBe('2030-01-02T03:04:05.000Z');
    expect(parseUtcTimestamp('2030-01-02 03:04:05.5', 'valid_until').toISOString()).toBe('2030-01-02T03:04:05.500Z');
    expect(parseUtcTimestamp('2030-01-02T03:04:05+02:00', 'valid_until').toISOString()).toBe('2030-01-02T01:04:05.000Z');
  });

  it('refuses an impossible date naming the field', () => {
    expect(() => parseUtcTimestamp('2030-13-45 00:00:00', 'valid_until')).toThrow('valid_until');
  });
});
