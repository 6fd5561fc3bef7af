import { CallHandler, ExecutionContext, HttpException, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { catchError, mergeMap, Observable, of } from 'rxjs';
import {
  Caller, IDEMPOTENCY_HEADER, IdempotencyClaim, IdempotencyKeys, IDEMPOTENT_REPLAYED_HEADER, isFinalAnswer, isIdempotent, OPERATION_KEY,
  OperationName, parseIdempotencyKey,
} from '@ws/auth';
import { ApiError, httpStatusFor } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { describeError } from '../errors/api-exception.filter';
import { ReplayedAnswer } from '../errors/replayed-answer';

/** Every successful operation answers 200 (@Operation sets it). */
const SUCCESS_STATUS = 200;

/**
 * `Idempotency-Key` on the operations the catalog marks `idempotent` (the rules are @ws/auth's IdempotencyKeys).
 * Runs after the guard (the key is scoped to the authenticated caller) and around validation and the handler, so
 * controllers stay unchanged. Without the header, or on other operations, it does nothing.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly reflector: Reflector,
    private readonly keys: IdempotencyKeys,
    private readonly metrics: Metrics,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    if (context.getType() !== 'http') return next.handle();
    const request = context.switchToHttp().getRequest<FastifyRequest & { caller?: Caller }>();
    const header = request.headers[IDEMPOTENCY_HEADER];
    if (header === undefined) return next.handle();
    const operation = this.reflector.get<OperationName | undefined>(OPERATION_KEY, context.getHandler());
    if (!operation || !isIdempotent(operation) || !request.caller) return next.handle();
    const begun = await this.keys.begin(request.caller, parseIdempotencyKey(header), operation, request.body);
    if (begun.kind === 'replay') {
      this.metrics.idempotentReplays.inc({ operation });
      void context.switchToHttp().getResponse<FastifyReply>().header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      if (begun.status === SUCCESS_STATUS) return of(begun.body);
      throw new ReplayedAnswer(begun.status, begun.body as Record<string, unknown>);
    }
    return next.handle().pipe(
      mergeMap(async (result: unknown) => {
        await this.keys.complete(begun, SUCCESS_STATUS, result).catch((err: unknown) => this.unrecorded(begun, err));
        return result;
      }),
      catchError(async (error: unknown) => {
        const answer = finalAnswer(error);
        const stored = answer ? this.keys.complete(begun, answer.status, answer.body) : this.keys.release(begun);
        await stored.catch((err: unknown) => this.unrecorded(begun, err));
        throw error;
      }),
    );
  }

  /**
   * The answer could not be stored or the key released (PostgreSQL failed meanwhile): the request's own answer
   * still goes out; the claim counts as abandoned after ABANDONED_CLAIM_SECONDS and a retry then runs again.
   */
  private unrecorded(claim: IdempotencyClaim, err: unknown): void {
    this.logger.warn(`Idempotency-Key of api key ${claim.apiKeyId} not recorded: ${(err as Error)?.message ?? String(err)}`);
  }
}

/** A refusal to store and replay (isFinalAnswer), as the exception filter would send it; null for the others. */
function finalAnswer(error: unknown): { status: number; body: Record<string, unknown> } | null {
  const status = error instanceof ApiError ? httpStatusFor(error.code) : error instanceof HttpException ? error.getStatus() : 500;
  if (!isFinalAnswer(status, error instanceof ApiError ? error.code : undefined)) return null;
  const described = describeError(error);
  return { status: described.status, body: described.body };
}
