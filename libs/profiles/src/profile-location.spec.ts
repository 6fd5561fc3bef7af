import { validateKey } from '@ws/storage';
import { InvalidProfilePathError, resolveProfileLocation } from './profile-location';

describe('resolveProfileLocation', () => {
  const values = { username: 'Ann.Smith+x/../y', userId: '0b7e2c5e-1111-4222-8333-944445555666', imageId: 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee' };

  it('fills the templates with key-safe values (ids as 32 hex digits, the username escaped)', () => {
    expect(resolveProfileLocation('s3://bucket/profiles/{username}/{image_id}', values)).toBe('s3://bucket/profiles/Ann.Smith_2Bx_2F.._2Fy/aaaaaaaabbbb4ccc8dddeeeeeeeeeeee');
    expect(resolveProfileLocation('file:///srv/profiles/{user_id}/', values)).toBe('file:///srv/profiles/0b7e2c5e111142228333944445555666');
    expect(resolveProfileLocation('file://./data/profiles/{user_id}', values)).toBe('file://./data/profiles/0b7e2c5e111142228333944445555666');
  });

  it('escapes injectively and never yields a segment a key refuses', () => {
    const names = ['a_2F', 'a/', 'a%2F', '.hidden', '..', 'ü', '_ü', '_C3_BC', 'a b', '=', '-x', '_'];
    const resolved = names.map((username) => resolveProfileLocation('s3://bucket/p/{username}', { ...values, username }));
    expect(new Set(resolved).size).toBe(names.length);
    for (const location of resolved) expect(() => validateKey(location.slice('s3://bucket/'.length))).not.toThrow();
  });

  it.each([
    ['/srv/profiles/{user_id}', 'must be file://'],
    ['http://example.com/{user_id}', 'must be file://'],
    ['s3://Bad_Bucket/{user_id}', 'must be file://'],
    ['file://', 'must name a directory'],
    ['file:///srv/../{user_id}', 'must name a directory'],
    ['s3://bucket/a//{user_id}', 'prefix must be segments'],
    ['s3://bucket/{home}', 'unknown template {home}'],
  ])('refuses %s', (template, message) => {
    expect(() => resolveProfileLocation(template, values)).toThrow(InvalidProfilePathError);
    expect(() => resolveProfileLocation(template, values)).toThrow(message);
  });

  it('needs a user for {username} and {user_id}', () => {
    expect(() => resolveProfileLocation('file:///p/{username}', { imageId: values.imageId })).toThrow(InvalidProfilePathError);
  });
});
