import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import Redis from 'ioredis';
import { ApiError, AppConfig, ErrorCode } from '@ws/common';

/** Redis clients of this process: one shared for commands and producers; workers get their own (blocking). */
@Injectable()
export class RedisConnections implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(RedisConnections.name);
  private sharedClient: Redis | null = null;
  private readonly dedicated: Redis[] = [];

  constructor(private readonly config: AppConfig) {}

  /** Gives the shared client a bounded chance to connect before the first request; Redis being down does not stop boot. */
  async onModuleInit(): Promise<void> {
    const client = this.shared();
    if (client.status === 'ready') return;
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.config.DEPENDENCY_TIMEOUT_MS);
      client.once('ready', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!ready) this.logger.warn(`Redis did not answer within ${this.config.DEPENDENCY_TIMEOUT_MS} ms; serving 503 until it does`);
  }

  /**
   * Every command is bounded (commandTimeout) and fails at once while the connection is down (no offline
   * queue, one retry after a dropped connection), so callers answer 503 instead of waiting for Redis. Not
   * queueing offline also means a command a caller was told failed is never sent later. ioredis keeps
   * reconnecting in the background; BullMQ producers on this client recover with it.
   */
  shared(): Redis {
    if (!this.sharedClient) {
      const timeout = this.config.DEPENDENCY_TIMEOUT_MS;
      const client = new Redis(this.config.REDIS_URL, {
        lazyConnect: false, connectTimeout: timeout, commandTimeout: timeout, maxRetriesPerRequest: 1, enableOfflineQueue: false,
        retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
      });
      // Without a listener ioredis prints every failed reconnect; the health endpoint reports the outage.
      client.on('error', (err: Error) => this.logger.debug(`shared Redis connection: ${err.message}`));
      this.sharedClient = client;
    }
    return this.sharedClient;
  }

  /** Fails at once while the shared connection is down: BullMQ would wait for it without bound before a command. */
  assertConnected(): void {
    if (this.shared().status !== 'ready') throw new ApiError(ErrorCode.Unavailable, 'Redis is unavailable; retry later');
  }

  /** For BullMQ workers, which block on their connection (BullMQ requires maxRetriesPerRequest: null there). */
  dedicatedClient(): Redis {
    const client = new Redis(this.config.REDIS_URL, { maxRetriesPerRequest: null, connectTimeout: this.config.DEPENDENCY_TIMEOUT_MS });
    this.dedicated.push(client);
    return client;
  }

  /** Keys of this deployment's own (rate limits, counters) are prefixed like its queues. */
  key(...parts: string[]): string {
    return [this.config.REDIS_PREFIX, ...parts].join(':');
  }

  /** After every onModuleDestroy: queues and workers (which use these connections) are closed by then. */
  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.sharedClient, ...this.dedicated].filter((c): c is Redis => !!c).map((c) => c.quit().catch(() => c.disconnect())));
  }
}
