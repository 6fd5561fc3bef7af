import 'reflect-metadata';
import { isIdempotent, OPERATION_KEY, OperationName } from '@ws/auth';
import { API_CONTROLLERS } from '../app.module';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { interceptorsOf, withIdempotentRoutes } from './idempotent-routes';

describe('idempotent routes', () => {
  const handlers = () =>
    API_CONTROLLERS.flatMap((controller) =>
      Object.getOwnPropertyNames(controller.prototype)
        .map((method) => (controller.prototype as unknown as Record<string, unknown>)[method])
        .filter((handler): handler is object => typeof handler === 'function')
        .map((handler) => ({ handler, operation: Reflect.getMetadata(OPERATION_KEY, handler) as OperationName | undefined })),
    );

  it('the interceptor is on every operation the catalog marks idempotent, once, and on nothing else', () => {
    withIdempotentRoutes(API_CONTROLLERS); // a second app in the same process adds nothing
    const marked = handlers().filter(({ handler }) => interceptorsOf(handler).includes(IdempotencyInterceptor));
    const idempotent = handlers().filter(({ operation }) => operation !== undefined && isIdempotent(operation));
    expect(idempotent.length).toBeGreaterThan(0);
    expect(marked.map(({ operation }) => operation).sort()).toEqual(idempotent.map(({ operation }) => operation).sort());
    for (const { handler } of marked) expect(interceptorsOf(handler).filter((i) => i === IdempotencyInterceptor)).toHaveLength(1);
  });
});
