import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { Client } from 'pg';
import { AppConfig } from '@ws/common';

type Handler = (payload: string) => void;

/** How often the LISTEN connection proves it is alive: a stalled server or a silently dropped connection sends no error. */
const HEARTBEAT_MS = 10_000;

/**
 * One LISTEN connection per process. Subscribers also get `onReset` when the connection drops, because
 * notices sent while it was down are lost: whoever caches must then forget everything. After a drop it
 * reconnects every second and LISTENs on every channel again; a heartbeat notices a connection that died
 * without saying so.
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
  private heartbeatTimer: NodeJS.Timeout | null = null;

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
      // A failed LISTEN means the connection is going: the reconnect LISTENs on every channel, this one too.
      const client = this.client;
      if (client) await client.query(`LISTEN ${channel}`).catch(() => this.drop(client));
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
      connectionTimeoutMillis: this.config.DEPENDENCY_TIMEOUT_MS, query_timeout: this.config.DEPENDENCY_TIMEOUT_MS, keepAlive: true,
    });
    // Registered first: an error while connecting must not go unhandled (drop ignores a client not yet in use).
    client.on('error', () => this.drop(client));
    client.on('end', () => this.drop(client));
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
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.heartbeatTimer = setInterval(() => void client.query('SELECT 1').catch(() => this.drop(client)), HEARTBEAT_MS);
    this.heartbeatTimer.unref();
  }

  private drop(client: Client): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    void client.end().catch(() => undefined);
    this.logger.warn('LISTEN connection lost; reconnecting');
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
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
