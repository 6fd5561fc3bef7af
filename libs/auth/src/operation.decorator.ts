import { applyDecorators, createParamDecorator, ExecutionContext, HttpCode, Post, SetMetadata } from '@nestjs/common';
import type { Caller } from './caller';
import type { OperationName } from './operations';

export const OPERATION_KEY = 'ws:operation';
export const PUBLIC_ROUTE_KEY = 'ws:public-route';

/**
 * `POST /api/public/<name>` with the permissions of OPERATIONS[name]. The controller is mounted at
 * `api/public`; the guard reads the name and enforces the catalog entry.
 */
export const Operation = (name: OperationName) => applyDecorators(Post(name), HttpCode(200), SetMetadata(OPERATION_KEY, name));

/** A route that authenticates by other means (session JWT, login link) or not at all (health, static files). */
export const PublicRoute = () => SetMetadata(PUBLIC_ROUTE_KEY, true);

export const CurrentCaller = createParamDecorator((_: unknown, ctx: ExecutionContext): Caller => {
  const caller = ctx.switchToHttp().getRequest<{ caller?: Caller }>().caller;
  if (!caller) throw new Error('CurrentCaller used on a route without an @Operation');
  return caller;
});
