import { timingSafeEqual } from 'node:crypto';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ApiError, ErrorCode, sha256 } from '@ws/common';
import { PgNotifications } from '@ws/database/pg-notifications';
import { ApiKey } from './api-key.entity';
import type { Caller } from './caller';

const MAX_CACHED = 10_000;
/** Belt and braces: even with change notices, re-read a key at least this often. */
const CACHE_TTL_MS = 60_000;

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
 */
@Injectable()
export class ApiKeyAuthenticator implements OnModuleInit {
  private readonly cache = new Map<string, Cached>();

  constructor(
    @InjectRepository(ApiKey) private readonly keys: Repository<ApiKey>,
    private readonly notifications: PgNotifications,
  ) {}

  async onModuleInit(): Promise<void> {
    this.notifications.onReset(() => this.cache.clear());
    await this.notifications.subscribe('api_key_changed', (apiKey) => this.evict(apiKey));
  }

  evict(apiKey: string): void {
    this.cache.delete(apiKey);
  }

  async authenticate(apiKey: string, secret: string, now = Date.now()): Promise<Caller> {
    const entry = await this.load(apiKey, now);
    const presented = Buffer.from(sha256(secret), 'hex');
    if (!entry || !timingSafeEqual(presented, entry.secret)) {
      throw new ApiError(ErrorCode.Unauthenticated, 'Invalid api_key or api_key_secret');
    }
    if (entry.key.expiresAt && entry.key.expiresAt.getTime() <= now) {
      throw new ApiError(ErrorCode.Unauthenticated, 'The API key has expired');
    }
    return entry.caller;
  }

  private async load(apiKey: string, now: number): Promise<Cached | null> {
    const cached = this.cache.get(apiKey);
    if (cached && this.notifications.listening && now - cached.loadedAt < CACHE_TTL_MS) return cached;
    const key = await this.keys.findOneBy({ apiKey });
    if (!key || key.revokedAt) {
      this.cache.delete(apiKey);
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
}
