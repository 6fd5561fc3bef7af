import 'reflect-metadata';
import { Body, Controller, Query } from '@nestjs/common';
import { CurrentCaller, isIdempotent, Operation, OPERATIONS, OperationName } from '@ws/auth';
import { OPERATION_CONTROLLERS, ROUTED_CONTROLLERS } from '../app.module';
import { operationHandlersOf } from './operation-routes';

describe('operation routes', () => {
  const handlers = operationHandlersOf(OPERATION_CONTROLLERS);

  it('route every operation of the catalog once, at /api/public/<operation>, and Nest routes none', () => {
    expect(handlers.map((h) => h.operation).sort()).toEqual((Object.keys(OPERATIONS) as OperationName[]).sort());
    for (const handler of handlers) expect(handler.path).toBe(`/api/public/${handler.operation}`);
    expect(operationHandlersOf(ROUTED_CONTROLLERS)).toEqual([]);
  });

  it('take an Idempotency-Key on exactly the operations the catalog marks idempotent', () => {
    const idempotent = handlers.filter((h) => h.idempotent).map((h) => h.operation);
    expect(idempotent.length).toBeGreaterThan(0);
    expect(idempotent.sort()).toEqual(handlers.map((h) => h.operation).filter(isIdempotent).sort());
  });

  it('hand each parameter its source: the validated body, the caller, the reply', () => {
    const kinds = (operation: string) => handlers.find((h) => h.operation === operation)?.params.map((p) => p.kind);
    expect(kinds('get_user')).toEqual(['body']);
    expect(kinds('update_user')).toEqual(['body', 'custom']);
    expect(kinds('get_workspace_screenshot')).toEqual(['body', 'reply']);
  });

  it('refuse at start a parameter they cannot fill', () => {
    @Controller('api/public')
    class Odd {
      @Operation('get_user')
      get(@Body() _body: object, @Query('q') _q: string) {
        return {};
      }
    }
    expect(() => operationHandlersOf([Odd])).toThrow('Odd.get parameter 1');
    @Controller('api/public')
    class Undecorated {
      @Operation('get_user')
      get(_body: object, @CurrentCaller() _caller: unknown) {
        return {};
      }
    }
    expect(() => operationHandlersOf([Undecorated])).toThrow('Undecorated.get: every parameter needs a decorator');
  });
});
