import { ApiError, ErrorCode } from '@ws/common';
import { readCredentials } from './operation.guard';

const basic = (pair: string) => ({ headers: { authorization: `Basic ${Buffer.from(pair, 'utf8').toString('base64')}` } });

describe('readCredentials', () => {
  it('reads the pair from the body, or else from an HTTP Basic header', () => {
    expect(readCredentials({ body: { api_key: 'k', api_key_secret: 's' }, headers: {} })).toEqual({ apiKey: 'k', secret: 's' });
    expect(readCredentials(basic('k:s:with:colons'))).toEqual({ apiKey: 'k', secret: 's:with:colons' });
  });

  it.each([
    ['a NUL in api_key', { api_key: 'x\u0000', api_key_secret: 'y' }, 'api_key in the body contains a NUL character'],
    ['a NUL in api_key_secret', { api_key: 'x', api_key_secret: '\u0000' }, 'api_key_secret in the body contains a NUL character'],
    ['a lone surrogate in api_key', { api_key: '\uD800', api_key_secret: 'y' }, 'api_key in the body contains a lone UTF-16 surrogate (not valid Unicode)'],
  ])('refuses %s in the body with 400 before any lookup', (_what, body, message) => {
    expect(() => readCredentials({ body, headers: {} })).toThrow(new ApiError(ErrorCode.InvalidRequest, message));
  });

  it('refuses a NUL in either half of a Basic header with 400', () => {
    expect(() => readCredentials(basic('ke\u0000y:s'))).toThrow(new ApiError(ErrorCode.InvalidRequest, 'api_key in the Authorization header contains a NUL character'));
    expect(() => readCredentials(basic('key:s\u0000'))).toThrow(new ApiError(ErrorCode.InvalidRequest, 'api_key_secret in the Authorization header contains a NUL character'));
  });

  it('still answers 401 for missing or mistyped credentials', () => {
    expect(() => readCredentials({ headers: {} })).toThrow(new ApiError(ErrorCode.Unauthenticated, 'Missing api_key and api_key_secret'));
    expect(() => readCredentials({ body: { api_key: 1, api_key_secret: 's' }, headers: {} })).toThrow(new ApiError(ErrorCode.Unauthenticated, 'api_key and api_key_secret must both be strings'));
  });
});
