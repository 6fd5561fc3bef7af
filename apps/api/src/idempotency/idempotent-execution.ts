import { HttpException, Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  Caller, IDEMPOTENCY_HEADER, IdempotencyClaim, IdempotencyKeys, IDEMPOTENT_REPLAYED_HEADER, isFinalAnswer, OperationName, parseIdempotencyKey,
} from '@ws/auth';
import { ApiError, httpStatusFor } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { describeError } from '../errors/api-exception.filter';
import { ReplayedAnswer } from '../errors/replayed-answer';

/** Every successful operation answers 200. */
const SUCCESS_STATUS = 200;

/**
 * `Idempotency-Key` on the operations the catalog marks `idempotent` (the rules are @ws/auth's IdempotencyKeys).
 * The operation routes run it after the key check (the key is scoped to the authenticated caller) and around
 * validation and the handler. Without the header it only runs them.
 */
@Injectable()
export class IdempotentExecution {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly keys: IdempotencyKeys,
    private readonly metrics: Metrics,
  ) {}

  async run(operation: OperationName, request: FastifyRequest & { caller?: Caller }, reply: FastifyReply, execute: () => Promise<unknown>): Promise<unknown> {
    const header = request.headers[IDEMPOTENCY_HEADER];
    if (header === undefined || !request.caller) return execute();
    const begun = await this.keys.begin(request.caller, parseIdempotencyKey(header), operation, request.body);
    if (begun.kind === 'replay') {
      this.metrics.idempotentReplays.inc({ operation });
      void reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      if (begun.status === SUCCESS_STATUS) return begun.body;
      throw new ReplayedAnswer(begun.status, begun.body as Record<string, unknown>);
    }
    let result: unknown;
    try {
      result = await execute();
    } catch (error) {
      const answer = finalAnswer(error);
      const stored = answer ? this.keys.complete(begun, answer.status, answer.body) : this.keys.release(begun);
      await stored.catch((err: unknown) => this.unrecorded(begun, err));
      throw error;
    }
    await this.keys.complete(begun, SUCCESS_STATUS, result).catch((err: unknown) => this.unrecorded(begun, err));
    return result;
  }

  /**
   * The answer could not be stored or the key released (PostgreSQL failed meanwhile): the request's own answer
   * still goes out; the claim counts as abandoned after ABANDONED_CLAIM_SECONDS and a retry then runs again.
   */
  private unrecorded(claim: IdempotencyClaim, err: unknown): void {
    this.logger.warn(`Idempotency-Key of api key ${claim.apiKeyId} not recorded: ${(err as Error)?.message ?? String(err)}`);
  }
}

/** A refusal to store and replay (isFinalAnswer), as the error would be sent; null for the others. */
function finalAnswer(error: unknown): { status: number; body: Record<string, unknown> } | null {
  const status = error instanceof ApiError ? httpStatusFor(error.code) : error instanceof HttpException ? error.getStatus() : 500;
  if (!isFinalAnswer(status, error instanceof ApiError ? error.code : undefined)) return null;
  const described = describeError(error);
  return { status: described.status, body: described.body };
}
