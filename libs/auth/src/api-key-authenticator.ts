import { timingSafeEqual } from 'node:crypto';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ApiError, AppConfig, ErrorCode, sha256 } from '@ws/common';
import { PgNotifications } from '@ws/database';
import { ApiKey } from './api-key.entity';
import type { Caller } from './caller';

const MAX_CACHED = 10_000;
/** Belt and braces: even with change notices, re-read a key at least this often. */
const CACHE_TTL_MS = 60_000;
/** Issued keys are 32 characters; anything much longer names no key and is refused without a query. */
const MAX_API_KEY_LENGTH = 128;

/** A refused api_key; `keyExists` says whether the failure counts against that key's own limit. */
export class KeyAuthenticationError extends ApiError {
  constructor(
    message: string,
    readonly keyExists: boolean,
  ) {
    super(ErrorCode.Unauthenticated, message);
  }
}

interface Cached {
  key: ApiKey;
  caller: Caller;
  secret: Buffer;
  loadedAt: number;
}

/**
 * Authenticates (api_key, api_key_secret) in microseconds: keys are cached in memory and compared with
 * a constant-time SHA-256 check. Any change to a key row (revoke, permissions, expiry) arrives as a
 * PostgreSQL notice and evicts it at once; while notices cannot be received nothing is served from cache.
 * Unknown keys are remembered briefly too (AUTH_UNKNOWN_KEY_CACHE_SECONDS); inserting a key evicts that.
 */
@Injectable()
export class ApiKeyAuthenticator implements OnModuleInit {
  private readonly cache = new Map<string, Cached>();
  /** api_key → until when it is known not to exist. */
  private readonly unknown = new Map<string, number>();

  constructor(
    @InjectRepository(ApiKey) private readonly keys: Repository<ApiKey>,
    private readonly notifications: PgNotifications,
    private readonly config: AppConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    this.notifications.onReset(() => {
      this.cache.clear();
      this.unknown.clear();
    });
    await this.notifications.subscribe('api_key_changed', (apiKey) => this.evict(apiKey));
  }

  evict(apiKey: string): void {
    this.cache.delete(apiKey);
    this.unknown.delete(apiKey);
  }

  /** True when authenticating this key needs no database query (known, or known not to exist). */
  isCached(apiKey: string, now = Date.now()): boolean {
    if (apiKey.length > MAX_API_KEY_LENGTH) return true;
    if (!this.notifications.listening) return false;
    const cached = this.cache.get(apiKey);
    return (cached !== undefined && now - cached.loadedAt < CACHE_TTL_MS) || (this.unknown.get(apiKey) ?? 0) > now;
  }

  async authenticate(apiKey: string, secret: string, now = Date.now()): Promise<Caller> {
    return this.check(await this.load(apiKey, now), secret, now);
  }

  /**
   * authenticate for a key held in memory, without a promise (the usual case of every operation); undefined when
   * the key must be read first.
   */
  cachedCaller(apiKey: string, secret: string, now = Date.now()): Caller | undefined {
    const cached = this.cache.get(apiKey);
    if (!cached || !this.notifications.listening || now - cached.loadedAt >= CACHE_TTL_MS) return undefined;
    return this.check(cached, secret, now);
  }

  private check(entry: Cached | null, secret: string, now: number): Caller {
    const presented = Buffer.from(sha256(secret), 'hex');
    if (!entry || !timingSafeEqual(presented, entry.secret)) {
      throw new KeyAuthenticationError('Invalid api_key or api_key_secret', entry !== null);
    }
    if (entry.key.expiresAt && entry.key.expiresAt.getTime() <= now) {
      throw new KeyAuthenticationError('The API key has expired', true);
    }
    return entry.caller;
  }

  private async load(apiKey: string, now: number): Promise<Cached | null> {
    const cached = this.cache.get(apiKey);
    if (cached && this.notifications.listening && now - cached.loadedAt < CACHE_TTL_MS) return cached;
    if (apiKey.length > MAX_API_KEY_LENGTH) return null;
    if (this.notifications.listening && (this.unknown.get(apiKey) ?? 0) > now) return null;
    const key = await this.keys.findOneBy({ apiKey });
    if (!key || key.revokedAt) {
      this.cache.delete(apiKey);
      this.rememberUnknown(apiKey, now);
      return null;
    }
    const entry: Cached = {
      key,
      secret: Buffer.from(key.secretSha256, 'hex'),
      loadedAt: now,
      caller: { apiKeyId: key.id, apiKey: key.apiKey, name: key.name, permissions: new Set(key.permissions), readOnly: key.readOnly },
    };
    if (this.notifications.listening) {
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(apiKey, entry);
    }
    return entry;
  }

  private rememberUnknown(apiKey: string, now: number): void {
    // Unknown (or revoked) keys are remembered so a flood of them costs no query; an insert notice evicts the entry.
    const ttlMs = this.config.AUTH_UNKNOWN_KEY_CACHE_SECONDS * 1000;
    if (!this.notifications.listening || ttlMs === 0) return;
    this.unknown.delete(apiKey);
    if (this.unknown.size >= MAX_CACHED) this.unknown.delete(this.unknown.keys().next().value as string);
    this.unknown.set(apiKey, now + ttlMs);
  }
}
