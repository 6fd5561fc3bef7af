import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { Client } from 'pg';
import { AppConfig } from '@ws/common';

type Handler = (payload: string) => void;

/**
 * One LISTEN connection per process. Subscribers also get `onReset` when the connection drops, because
 * notices sent while it was down are lost: whoever caches must then forget everything.
 */
@Injectable()
export class PgNotifications implements OnModuleDestroy {
  private readonly logger = new Logger(PgNotifications.name);
  private readonly handlers = new Map<string, Set<Handler>>();
  private readonly resetHandlers = new Set<() => void>();
  private client: Client | null = null;
  private connecting: Promise<void> | null = null;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(private readonly config: AppConfig) {}

  /** True while notices are being received; caches must not serve from memory otherwise. */
  get listening(): boolean {
    return this.client !== null;
  }

  async subscribe(channel: string, handler: Handler): Promise<void> {
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      if (this.client) await this.client.query(`LISTEN ${channel}`);
    }
    set.add(handler);
    await this.ensureConnected();
  }

  onReset(handler: () => void): void {
    this.resetHandlers.add(handler);
  }

  private ensureConnected(): Promise<void> {
    if (this.client || this.stopped) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new Client({
      host: this.config.DATABASE_HOST, port: this.config.DATABASE_PORT, user: this.config.DATABASE_USER,
      password: this.config.DATABASE_PASSWORD, database: this.config.DATABASE_NAME, application_name: 'workspace-server-listen',
    });
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      this.logger.warn(`LISTEN connection failed: ${(err as Error).message}; retrying`);
      this.scheduleRetry();
      return;
    }
    client.on('notification', (msg) => {
      for (const handler of this.handlers.get(msg.channel) ?? []) handler(msg.payload ?? '');
    });
    client.on('error', () => this.drop(client));
    client.on('end', () => this.drop(client));
    this.client = client;
  }

  private drop(client: Client): void {
    if (this.client !== client) return;
    this.client = null;
    for (const handler of this.resetHandlers) handler();
    if (!this.stopped) this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.ensureConnected();
    }, 1000);
    this.retryTimer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
