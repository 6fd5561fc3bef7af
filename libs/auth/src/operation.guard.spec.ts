import { ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiError, AppConfig, ErrorCode, loadConfig, randomSecret } from '@ws/common';
import { RedisConnections } from '@ws/queue';
import { type ApiKeyAuthenticator, KeyAuthenticationError } from './api-key-authenticator';
import { AuthRateLimiter } from './auth-rate-limiter';
import type { Caller } from './caller';
import { OPERATION_KEY, PUBLIC_ROUTE_KEY } from './operation.decorator';
import { OperationAuthorizer, OperationGuard } from './operation.guard';

function contextFor(metadata: Record<string, unknown>, body: unknown = {}): ExecutionContext {
  const handler = () => undefined;
  for (const [key, value] of Object.entries(metadata)) Reflect.defineMetadata(key, value, handler);
  class Controller {}
  return {
    getHandler: () => handler,
    getClass: () => Controller,
    switchToHttp: () => ({ getRequest: () => ({ body, headers: {} }) }),
  } as unknown as ExecutionContext;
}

const caller = (permissions: string[], readOnly = false): Caller => ({ apiKeyId: 'k', apiKey: 'k', name: 'k', permissions: new Set(permissions) as Caller['permissions'], readOnly });
// The limiter is real (Redis on loopback, a prefix of this run); failures are counted but stay under the limit.
const config: AppConfig = Object.assign(loadConfig(), { REDIS_PREFIX: `guard-spec-${randomSecret(4)}` });
const redis = new RedisConnections(config);
const limiter = new AuthRateLimiter(redis, config);
afterAll(() => redis.onApplicationShutdown());
// Nothing held in memory: every check takes authenticate's path.
const guardOf = (authenticator: Partial<ApiKeyAuthenticator>) => new OperationGuard(new Reflector(), new OperationAuthorizer({ cachedCaller: () => undefined, isCached: () => true, ...authenticator } as ApiKeyAuthenticator, limiter));
const guardWith = (c: Caller) => guardOf({ authenticate: async () => c });
const creds = { api_key: 'a', api_key_secret: 's' };

describe('OperationGuard', () => {
  it('refuses a route that declares neither an operation nor a public route, without authenticating', async () => {
    const authenticate = jest.fn();
    const guard = guardOf({ authenticate });
    await expect(guard.canActivate(contextFor({}, creds))).rejects.toEqual(new ApiError(ErrorCode.Forbidden, 'This route declares no permissions and is refused'));
    expect(authenticate).not.toHaveBeenCalled();
  });

  it('lets an explicit public route through without credentials', async () => {
    await expect(guardWith(caller([])).canActivate(contextFor({ [PUBLIC_ROUTE_KEY]: true }))).resolves.toBe(true);
  });

  it('requires the operation permissions with their dependencies', async () => {
    await expect(guardWith(caller(['Users Create'])).canActivate(contextFor({ [OPERATION_KEY]: 'create_user' }, creds))).rejects.toThrow('Missing permissions: Users View');
    await expect(guardWith(caller(['Users Create', 'Users View'])).canActivate(contextFor({ [OPERATION_KEY]: 'create_user' }, creds))).resolves.toBe(true);
  });

  it('refuses writes to a Read Only key, even a Global Admin one, and allows its reads', async () => {
    await expect(guardWith(caller(['Global Admin'], true)).canActivate(contextFor({ [OPERATION_KEY]: 'create_user' }, creds))).rejects.toThrow('Read Only');
    await expect(guardWith(caller(['Global Admin'], true)).canActivate(contextFor({ [OPERATION_KEY]: 'get_users' }, creds))).resolves.toBe(true);
  });

  it('asks for credentials when there are none', async () => {
    await expect(guardWith(caller(['Global Admin'])).canActivate(contextFor({ [OPERATION_KEY]: 'get_users' }))).rejects.toThrow('Missing api_key and api_key_secret');
  });

  it('answers for a key held in memory without a promise, and refuses a wrong secret for it with a 401', async () => {
    const held = caller(['Users View']);
    const request = { body: creds, headers: {}, ip: '127.0.0.9' };
    const fromMemory = new OperationAuthorizer({ cachedCaller: () => held } as unknown as ApiKeyAuthenticator, limiter);
    expect(fromMemory.authorize('get_users', request)).toBe(held);
    expect(() => fromMemory.authorize('create_user', request)).toThrow('Missing permissions');
    const wrongSecret = () => {
      throw new KeyAuthenticationError('Invalid api_key or api_key_secret', true);
    };
    const refusing = new OperationAuthorizer({ cachedCaller: wrongSecret } as unknown as ApiKeyAuthenticator, limiter);
    await expect(refusing.authorize('get_users', request)).rejects.toEqual(new ApiError(ErrorCode.Unauthenticated, 'Invalid api_key or api_key_secret'));
  });
});
