import { CallHandler, ExecutionContext, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import type Redis from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { catchError, Observable } from 'rxjs';
import { addressList, ApiError, AppConfig, ErrorCode } from '@ws/common';
import { RedisConnections } from '@ws/queue';
import { TrustedProxies } from './trusted-proxies';

export interface FailureLimits {
  /** Failures per window from one source address. */
  perAddress: number;
  /** Failures per window against one existing api_key, from any address. */
  perKey: number;
  windowSeconds: number;
  /** How long an address or key over its limit stays refused. */
  blockSeconds: number;
}

/** Who is trying: the source address, and the api_key when the failure was against a key that exists. */
export interface AuthAttempt {
  address: string;
  apiKey?: string;
}

/** Keys longer than this are never real api_keys: not sent to Redis. */
const MAX_KEY_LENGTH = 128;
/** Bounds this process's memory of blocks under a flood from many addresses. */
const MAX_LOCAL_BLOCKS = 100_000;

/** This process's memory of blocks, checked in microseconds on every authentication. Oldest entry goes first when full. */
class LocalBlocks {
  private readonly until = new Map<string, number>();

  add(key: string, untilMs: number): void {
    this.until.delete(key);
    if (this.until.size >= MAX_LOCAL_BLOCKS) this.until.delete(this.until.keys().next().value as string);
    this.until.set(key, untilMs);
  }

  remainingMs(key: string, now: number): number {
    const until = this.until.get(key);
    if (until === undefined) return 0;
    if (until > now) return until - now;
    this.until.delete(key);
    return 0;
  }
}

/**
 * Counts failed authentications per source address and per api_key in Redis, so every api replica sees one
 * count. A success never touches Redis: blocks this process has seen are kept in memory and checked first;
 * the Redis check (`blockedMs`) is for paths that are about to do database work anyway. When Redis fails,
 * an in-memory limiter of the same limits counts instead (per process), so an outage neither lifts the limits
 * nor makes a request fail.
 */
export class FailureLimiter {
  private readonly byAddress: RateLimiterRedis;
  private readonly byKey: RateLimiterRedis;
  private readonly local = new LocalBlocks();

  constructor(
    client: Redis,
    /** This deployment's Redis key prefix (RedisConnections.key). */
    keyPrefix: string,
    private readonly limits: FailureLimits,
    private readonly logger = new Logger(FailureLimiter.name),
  ) {
    const limiter = (points: number, scope: string) => {
      const options = { points, duration: limits.windowSeconds, blockDuration: limits.blockSeconds };
      return new RateLimiterRedis({
        ...options, storeClient: client, keyPrefix: `${keyPrefix}:auth-failures:${scope}`,
        // While the connection is down, count in memory at once instead of waiting for a command to fail.
        rejectIfRedisNotReady: true, insuranceLimiter: new RateLimiterMemory(options),
      });
    };
    this.byAddress = limiter(limits.perAddress, 'address');
    this.byKey = limiter(limits.perKey, 'key');
  }

  /** Milliseconds the attempt is still refused for, as far as this process already knows (no Redis). */
  blockedLocallyMs(attempt: AuthAttempt, now = Date.now()): number {
    const byAddress = this.local.remainingMs(`address:${attempt.address}`, now);
    const byKey = attempt.apiKey === undefined ? 0 : this.local.remainingMs(`key:${attempt.apiKey}`, now);
    return Math.max(byAddress, byKey);
  }

  /** Milliseconds the attempt is refused for, counting failures seen by every replica (one Redis round trip). */
  async blockedMs(attempt: AuthAttempt, now = Date.now()): Promise<number> {
    const local = this.blockedLocallyMs(attempt, now);
    if (local > 0) return local;
    const [byAddress, byKey] = await Promise.all([
      this.blockedIn(this.byAddress, this.limits.perAddress, attempt.address),
      countable(attempt.apiKey) ? this.blockedIn(this.byKey, this.limits.perKey, attempt.apiKey) : 0,
    ]);
    this.remember(attempt, byAddress, byKey, now);
    return Math.max(byAddress, byKey);
  }

  /** Counts one failure; answers the milliseconds the attempt is now refused for (0 while under the limits). */
  async recordFailure(attempt: AuthAttempt, now = Date.now()): Promise<number> {
    const [byAddress, byKey] = await Promise.all([
      this.consume(this.byAddress, attempt.address),
      countable(attempt.apiKey) ? this.consume(this.byKey, attempt.apiKey) : 0,
    ]);
    this.remember(attempt, byAddress, byKey, now);
    return Math.max(byAddress, byKey);
  }

  private remember(attempt: AuthAttempt, byAddressMs: number, byKeyMs: number, now: number): void {
    if (byAddressMs > 0) this.local.add(`address:${attempt.address}`, now + byAddressMs);
    if (byKeyMs > 0) this.local.add(`key:${attempt.apiKey}`, now + byKeyMs);
  }

  private async consume(limiter: RateLimiterRedis, key: string): Promise<number> {
    try {
      await limiter.consume(key);
      return 0;
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return Math.max(1, rejection.msBeforeNext);
      // Redis and the in-memory insurance both failed: this failure goes uncounted rather than failing the request.
      this.logger.warn(`failed-authentication count not recorded: ${(rejection as Error)?.message ?? String(rejection)}`);
      return 0;
    }
  }

  private async blockedIn(limiter: RateLimiterRedis, points: number, key: string): Promise<number> {
    try {
      const state = await limiter.get(key);
      return state && state.consumedPoints > points ? Math.max(1, state.msBeforeNext) : 0;
    } catch (err) {
      this.logger.warn(`failed-authentication count not read: ${(err as Error)?.message ?? String(err)}`);
      return 0;
    }
  }
}

function countable(apiKey: string | undefined): apiKey is string {
  return apiKey !== undefined && apiKey.length > 0 && apiKey.length <= MAX_KEY_LENGTH;
}

/**
 * Failed authentication limits of this deployment (AUTH_FAILURES_* and AUTH_BLOCK_SECONDS), answering 429
 * with Retry-After. Used by the operation guard (API keys) and the browser routes (login links, session JWTs,
 * stream admission).
 */
@Injectable()
export class AuthRateLimiter {
  readonly proxies: TrustedProxies;
  private readonly limiter: FailureLimiter;

  constructor(redis: RedisConnections, config: AppConfig) {
    this.proxies = new TrustedProxies(addressList(config.TRUSTED_PROXIES));
    this.limiter = new FailureLimiter(redis.shared(), redis.key(), {
      perAddress: config.AUTH_FAILURES_PER_ADDRESS, perKey: config.AUTH_FAILURES_PER_KEY,
      windowSeconds: config.AUTH_FAILURE_WINDOW_SECONDS, blockSeconds: config.AUTH_BLOCK_SECONDS,
    });
  }

  /** 429 if this process already knows the address or key is blocked: microseconds, no Redis. */
  assertNotBlockedHere(attempt: AuthAttempt): void {
    const ms = this.limiter.blockedLocallyMs(attempt);
    if (ms > 0) throw rateLimited(ms);
  }

  /** 429 if any replica's failures blocked the address or key: before database work. */
  async assertNotBlocked(attempt: AuthAttempt): Promise<void> {
    const ms = await this.limiter.blockedMs(attempt);
    if (ms > 0) throw rateLimited(ms);
  }

  /**
   * After a failure: a 401 (or a credential that matched nothing, such as an unknown cast link) is counted and
   * answered as 429 once over the limit; any other error is left as it is.
   */
  async failed(error: unknown, attempt: AuthAttempt): Promise<unknown> {
    if (!(error instanceof ApiError) || (error.code !== ErrorCode.Unauthenticated && !error.failedCredential)) return error;
    const ms = await this.limiter.recordFailure(attempt);
    return ms > 0 ? rateLimited(ms) : error;
  }
}

function rateLimited(ms: number): ApiError {
  return new ApiError(ErrorCode.RateLimited, 'Too many failed authentication attempts; retry later', {}, { retryAfterSeconds: ms / 1000 });
}

/**
 * For browser routes whose credential is a login token or a session JWT: a blocked address is refused before
 * the handler does any work, and every 401 the handler throws is counted against the address.
 */
@Injectable()
export class LimitFailedAuth implements NestInterceptor {
  constructor(private readonly limiter: AuthRateLimiter) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const attempt = { address: context.switchToHttp().getRequest<{ ip: string }>().ip };
    await this.limiter.assertNotBlocked(attempt);
    return next.handle().pipe(catchError(async (err: unknown) => {
      throw await this.limiter.failed(err, attempt);
    }));
  }
}
