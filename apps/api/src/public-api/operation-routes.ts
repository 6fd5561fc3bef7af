import type { INestApplicationContext, Type } from '@nestjs/common';
import { PATH_METADATA, RESPONSE_PASSTHROUGH_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Caller, isIdempotent, OPERATION_KEY, OperationAuthorizer, OperationName } from '@ws/auth';
import { validateBody } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { sendError } from '../errors/api-exception.filter';
import { IdempotentExecution } from '../idempotency/idempotent-execution';
import { ApiShutdown } from '../shutdown';

/** Where a handler's parameter comes from: the validated body, a custom decorator's factory (CurrentCaller), the reply. */
type ParamSource =
  | { kind: 'body'; type: new () => object }
  | { kind: 'custom'; factory: (data: unknown, context: ExecutionContextHost) => unknown; data: unknown }
  | { kind: 'reply' };

/** One `@Operation` handler of a controller, as its decorators declare it. */
export interface OperationHandler {
  operation: OperationName;
  controller: Type<unknown>;
  method: string;
  /** `/api/public/<operation>`. */
  path: string;
  params: ParamSource[];
  /** The catalog marks it idempotent: it takes an Idempotency-Key. */
  idempotent: boolean;
}

/** Nest's record of one decorated parameter (ROUTE_ARGS_METADATA); custom decorators carry their factory. */
interface RouteArg {
  index: number;
  data?: unknown;
  factory?: (data: unknown, context: ExecutionContextHost) => unknown;
}

/**
 * The operations of these controllers, from their decorators (@Operation, @Body, @CurrentCaller, @Res with
 * passthrough). Any other parameter is refused here, at start, rather than handed `undefined` at a request.
 */
export function operationHandlersOf(controllers: Array<Type<unknown>>): OperationHandler[] {
  const handlers: OperationHandler[] = [];
  for (const controller of controllers) {
    const base = (Reflect.getMetadata(PATH_METADATA, controller) as string | undefined) ?? '';
    const prototype = controller.prototype as Record<string, unknown>;
    for (const method of Object.getOwnPropertyNames(prototype)) {
      const handler = prototype[method];
      if (method === 'constructor' || typeof handler !== 'function') continue;
      const operation = Reflect.getMetadata(OPERATION_KEY, handler) as OperationName | undefined;
      if (!operation) continue;
      const sub = Reflect.getMetadata(PATH_METADATA, handler) as string;
      const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) ?? {}) as Record<string, RouteArg>;
      const types = (Reflect.getMetadata('design:paramtypes', prototype, method) ?? []) as Array<new () => object>;
      const params: ParamSource[] = [];
      for (const [key, arg] of Object.entries(args)) {
        // Nest's key is `<RouteParamtypes>:<index>` (a custom decorator's carries its factory instead).
        const kind = Number(key.split(':')[0]);
        if (arg.factory) params[arg.index] = { kind: 'custom', factory: arg.factory, data: arg.data };
        else if (kind === RouteParamtypes.BODY && arg.data === undefined) params[arg.index] = { kind: 'body', type: types[arg.index] };
        else if (kind === RouteParamtypes.RESPONSE && Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, method)) params[arg.index] = { kind: 'reply' };
        else throw new Error(`${controller.name}.${method} parameter ${arg.index}: an operation takes its body (@Body()), @CurrentCaller() or @Res({ passthrough: true }), not ${key}`);
      }
      if (params.length !== handler.length || params.includes(undefined as never)) throw new Error(`${controller.name}.${method}: every parameter needs a decorator`);
      handlers.push({ operation, controller, method, path: `/${[base, sub].filter(Boolean).join('/')}`, params, idempotent: isIdempotent(operation) });
    }
  }
  return handlers;
}

/**
 * Every operation as a Fastify route of its own, one pipeline for all of them: the key and the catalog's
 * permissions (OperationAuthorizer), an Idempotency-Key where the catalog allows one, the DTO's rules, the handler,
 * and any failure sent as describeError says. Nest still makes the controllers (they are providers) and runs the
 * other routes; its route execution (guards, pipes, interceptors and parameter factories run as chains of promises)
 * would cost each operation about 20 promises (under Node 20, each also ran the log context's async-context hooks).
 * Registered before the application listens; the request hooks (log context, metrics, request id) apply as to any route.
 * Each run is counted (ApiShutdown), so a shutdown closes the pools only after the operations using them have ended.
 */
export function registerOperationRoutes(fastify: FastifyInstance, app: INestApplicationContext, controllers: Array<Type<unknown>>): void {
  const authorizer = app.get(OperationAuthorizer);
  const idempotency = app.get(IdempotentExecution);
  const metrics = app.get(Metrics);
  const shutdown = app.get(ApiShutdown);
  const fail = (error: unknown, request: FastifyRequest, reply: FastifyReply) => sendError(reply, request.id, error, metrics);
  for (const handler of operationHandlersOf(controllers)) {
    const instance = app.get(handler.controller) as Record<string, (...args: unknown[]) => unknown>;
    const method = instance[handler.method];
    const argumentsOf = (request: FastifyRequest, reply: FastifyReply): unknown[] =>
      handler.params.map((param) =>
        param.kind === 'body' ? validateBody(param.type, request.body)
          : param.kind === 'reply' ? reply
            : param.factory(param.data, new ExecutionContextHost([request, reply], handler.controller, method)));
    const execute = (request: FastifyRequest, reply: FastifyReply) => method.apply(instance, argumentsOf(request, reply)) as Promise<unknown>;
    fastify.route({
      method: 'POST',
      url: handler.path,
      // Failures before the handler (the body's parser, its limits) leave in the same shape.
      errorHandler: fail,
      handler: async (request: FastifyRequest & { caller?: Caller }, reply: FastifyReply) => {
        shutdown.operationStarted();
        try {
          // A key held in memory is checked without a promise (most requests): nothing to wait for then.
          const authorized = authorizer.authorize(handler.operation, request);
          if (authorized instanceof Promise) await authorized;
          const result = handler.idempotent ? await idempotency.run(handler.operation, request, reply, () => execute(request, reply)) : await execute(request, reply);
          return result === undefined ? reply.send() : result;
        } catch (error) {
          fail(error, request, reply);
          return reply;
        } finally {
          shutdown.operationEnded();
        }
      },
    });
  }
}
