import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { AppConfig } from '@ws/common';

/** Redis clients of this process: one shared for commands and producers; workers get their own (blocking). */
@Injectable()
export class RedisConnections implements OnApplicationShutdown {
  private sharedClient: Redis | null = null;
  private readonly dedicated: Redis[] = [];

  constructor(private readonly config: AppConfig) {}

  shared(): Redis {
    this.sharedClient ??= new Redis(this.config.REDIS_URL, { maxRetriesPerRequest: null, lazyConnect: false });
    return this.sharedClient;
  }

  /** For BullMQ workers, which block on their connection. */
  dedicatedClient(): Redis {
    const client = new Redis(this.config.REDIS_URL, { maxRetriesPerRequest: null });
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
