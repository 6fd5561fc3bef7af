import { Type, UseInterceptors } from '@nestjs/common';
import { INTERCEPTORS_METADATA } from '@nestjs/common/constants';
import { isIdempotent, OPERATION_KEY, OperationName } from '@ws/auth';
import { IdempotencyInterceptor } from './idempotency.interceptor';

/**
 * Puts the IdempotencyInterceptor on exactly the handlers whose operation the catalog marks `idempotent`, once
 * (the app is made more than once per process in the tests). Not a global interceptor: Nest runs each global
 * interceptor on every request, with an rxjs pipeline and two async-context bindings, and the reads integrators
 * poll never take an Idempotency-Key.
 */
export function withIdempotentRoutes<T extends Type>(controllers: T[]): T[] {
  for (const controller of controllers) {
    const prototype = controller.prototype as Record<string, unknown>;
    for (const method of Object.getOwnPropertyNames(prototype)) {
      const descriptor = Object.getOwnPropertyDescriptor(prototype, method);
      const handler = descriptor?.value as object | undefined;
      if (!descriptor || typeof handler !== 'function') continue;
      const operation = Reflect.getMetadata(OPERATION_KEY, handler) as OperationName | undefined;
      if (!operation || !isIdempotent(operation) || interceptorsOf(handler).includes(IdempotencyInterceptor)) continue;
      UseInterceptors(IdempotencyInterceptor)(prototype, method, descriptor);
    }
  }
  return controllers;
}

export function interceptorsOf(handler: object): unknown[] {
  return (Reflect.getMetadata(INTERCEPTORS_METADATA, handler) as unknown[] | undefined) ?? [];
}
