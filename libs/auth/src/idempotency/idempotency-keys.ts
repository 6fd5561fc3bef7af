import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { ApiError, AppConfig, ErrorCode } from '@ws/common';
import { rawQuery } from '@ws/database';
import type { Caller } from '../caller';
import type { OperationName } from '../operations';
import { IDEMPOTENCY_KEY_TTL_SECONDS, requestFingerprint } from './idempotency-rules';

/**
 * A claim older than this whose request never answered is taken to be abandoned (its process died between
 * claiming and answering): the next request with the same key and body runs instead. Requests are bounded far
 * below it (every statement by DEPENDENCY_TIMEOUT_MS, launches are enqueued), so a live one is never overtaken.
 */
export const ABANDONED_CLAIM_SECONDS = 300;
/** Rows one statement of the expiry removes; the job repeats statements until none is left (bounded). */
const EXPIRY_BATCH = 5000;
const MAX_EXPIRY_BATCHES = 200;
/** Polling a running first request: from 20 ms, growing to 250 ms, for at most IDEMPOTENCY_WAIT_MS. */
const FIRST_POLL_MS = 20;
const MAX_POLL_MS = 250;
const MAX_POLLS = 10_000;

/** This request runs the operation; it then stores the answer (`complete`) or gives the key back (`release`). */
export interface IdempotencyClaim {
  kind: 'claimed';
  apiKeyId: string;
  key: string;
  claim: string;
}

/** An earlier request with this key and body answered: this answer is sent again and nothing runs. */
export interface IdempotentReplay {
  kind: 'replay';
  status: number;
  body: unknown;
}

interface KeyRow {
  operation: string;
  request_sha256: string;
  status_code: number | null;
  response_body: string | null;
}

/**
 * The `Idempotency-Key` store (table `idempotency_keys`), scoped to the calling API key and shared by every api
 * replica through PostgreSQL. The row inserted first is the lock: `begin` claims the key with one INSERT … ON
 * CONFLICT, or else replays the stored answer, refuses a different request (409 naming the key), or waits for
 * the running first request, boundedly (then 409 "in progress").
 */
@Injectable()
export class IdempotencyKeys {
  constructor(
    private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {}

  async begin(caller: Caller, key: string, operation: OperationName, body: unknown): Promise<IdempotencyClaim | IdempotentReplay> {
    const fingerprint = requestFingerprint(body);
    const deadline = Date.now() + this.config.IDEMPOTENCY_WAIT_MS;
    let pollMs = FIRST_POLL_MS;
    for (let polls = 0; polls < MAX_POLLS; polls++) {
      const claim = randomUUID();
      // Inserts the key, or takes over an expired row (any request) or an abandoned claim (the same request).
      const [claimed] = await rawQuery<{ claim: string }>(this.db, `
        INSERT INTO idempotency_keys AS k (api_key_id, key, operation, request_sha256, claim, claimed_at, created_at)
        VALUES ($1, $2, $3, $4, $5, now(), now())
        ON CONFLICT (api_key_id, key) DO UPDATE
           SET operation = EXCLUDED.operation, request_sha256 = EXCLUDED.request_sha256, claim = EXCLUDED.claim,
               claimed_at = now(), status_code = NULL, response_body = NULL,
               created_at = CASE WHEN k.created_at < now() - make_interval(secs => $6) THEN now() ELSE k.created_at END
         WHERE k.created_at < now() - make_interval(secs => $6)
            OR (k.status_code IS NULL AND k.claimed_at < now() - make_interval(secs => $7)
                AND k.operation = EXCLUDED.operation AND k.request_sha256 = EXCLUDED.request_sha256)
        RETURNING claim`,
      [caller.apiKeyId, key, operation, fingerprint, claim, IDEMPOTENCY_KEY_TTL_SECONDS, ABANDONED_CLAIM_SECONDS]);
      if (claimed) return { kind: 'claimed', apiKeyId: caller.apiKeyId, key, claim };
      const [row] = await rawQuery<KeyRow>(this.db,
        'SELECT operation, request_sha256, status_code, response_body FROM idempotency_keys WHERE api_key_id = $1 AND key = $2',
        [caller.apiKeyId, key]);
      if (!row) continue; // released between the two statements (the first request failed with a retryable error)
      if (row.operation !== operation || row.request_sha256 !== fingerprint) {
        const what = row.operation !== operation ? `operation (${row.operation})` : 'request body';
        throw new ApiError(ErrorCode.Conflict, `Idempotency-Key ${JSON.stringify(key)} was already used with a different ${what}; use a new key for a new request`);
      }
      if (row.status_code !== null) return { kind: 'replay', status: row.status_code, body: JSON.parse(row.response_body ?? 'null') as unknown };
      const left = deadline - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(pollMs, left));
      pollMs = Math.min(MAX_POLL_MS, Math.ceil(pollMs * 1.5));
    }
    throw new ApiError(ErrorCode.Conflict, `A request with Idempotency-Key ${JSON.stringify(key)} is still in progress; retry later`, {}, { retryAfterSeconds: 1 });
  }

  /** Stores the answer of the claimed request, to be replayed. */
  async complete(claim: IdempotencyClaim, status: number, body: unknown): Promise<void> {
    await rawQuery(this.db, 'UPDATE idempotency_keys SET status_code = $4, response_body = $5 WHERE api_key_id = $1 AND key = $2 AND claim = $3',
      [claim.apiKeyId, claim.key, claim.claim, status, JSON.stringify(body ?? null)]);
  }

  /** Gives the key back after an answer that is not final (5xx, 429, not yet): a retry runs the request again. */
  async release(claim: IdempotencyClaim): Promise<void> {
    await rawQuery(this.db, 'DELETE FROM idempotency_keys WHERE api_key_id = $1 AND key = $2 AND claim = $3', [claim.apiKeyId, claim.key, claim.claim]);
  }

  /** Removes keys older than 24 hours (the worker's maintenance.expire-idempotency-keys); answers how many. */
  async expire(): Promise<number> {
    let removed = 0;
    for (let batch = 0; batch < MAX_EXPIRY_BATCHES; batch++) {
      const rows = await rawQuery<{ n: number }>(this.db, `
        WITH gone AS (
          DELETE FROM idempotency_keys WHERE ctid IN (
            SELECT ctid FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
          RETURNING 1)
        SELECT count(*)::int AS n FROM gone`, [IDEMPOTENCY_KEY_TTL_SECONDS, EXPIRY_BATCH]);
      removed += rows[0].n;
      if (rows[0].n < EXPIRY_BATCH) break;
    }
    return removed;
  }
}
