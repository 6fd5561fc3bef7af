import { hostname } from 'node:os';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '@ws/common';
import { Metrics } from '@ws/metrics';
import { PgNotifications } from '@ws/database';
import { pruneUserEvents } from '@ws/users';
import { AddressCheck, hostOf, webhookAddressPolicy } from './webhook-address';
import { send, SendResult, signatures } from './webhook-sender';
import { WebhookSecretStore } from './webhook-secrets';
import { cancelPending } from './webhooks.service';

/** The channel a trigger on webhook_messages notifies at each commit that added messages (see the migration). */
export const WEBHOOK_MESSAGE_CHANNEL = 'webhook_message';
/** Messages one endpoint's run sends before it hands the endpoint back (the next wake continues). */
const MAX_MESSAGES_PER_RUN = 200;
/** Ordering keys (workspaces, users…) one endpoint gets deliveries of at once: their messages go out in parallel. */
const KEYS_IN_FLIGHT = 8;
/** Longest wait between two looks at the queue, whatever the timers say (a lost notice, another worker's lease). */
const MAX_IDLE_MS = 5000;
const MIN_IDLE_MS = 100;
/** Longest retry delay. */
const MAX_RETRY_MS = 6 * 3600_000;
const SHUTDOWN_WAIT_MS = 5000;
/** Messages and attempts finished this long ago are pruned. */
export const WEBHOOK_RETENTION_DAYS = 7;

/**
 * A message is next for its endpoint when it is pending, due, and no older message of its ordering key (its
 * workspace, user or staging config) is still pending: order per key, no waiting across keys.
 */
const HEAD_OF_KEY = `m.state = 'pending' AND NOT EXISTS (
  SELECT 1 FROM webhook_messages e WHERE e.webhook_id = m.webhook_id AND e.state = 'pending' AND e.ordering_key = m.ordering_key AND e.id < m.id)`;

interface MessageRow {
  id: string;
  event_type: string;
  body: string;
  attempts: number;
  created_at: Date;
}

interface EndpointRow {
  id: string;
  url: string;
  enabled: boolean;
  secret: string;
  previous_secret: string | null;
  previous_valid: boolean;
}

/** Delay before attempt `attempts + 1`, after `attempts` failures: base, then 4 times longer each time, at most 6 hours. */
export function webhookRetryDelayMs(baseMs: number, attempts: number): number {
  return Math.min(MAX_RETRY_MS, baseMs * 4 ** Math.max(0, attempts - 1));
}

/**
 * Sends webhook messages (worker). The queue is the webhook_messages table: nothing is lost with Redis or a
 * worker. Each endpoint is served by one worker process at a time (a lease on its row, renewed while it serves,
 * taken over after WORKER_LOCK_MS when its worker died), so its messages go out in order per key; each served
 * endpoint runs on its own, so a slow or dead receiver (at most 10 s per attempt) holds up only its own messages,
 * never other endpoints or the lifecycle (the feeds only write rows). Woken by a PostgreSQL notice per commit
 * that added messages, and by a timer at the next retry (at most every 5 s).
 */
@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(WebhookDispatcher.name);
  private readonly me = `${hostname()}:${process.pid}`;
  private readonly serving = new Map<string, Promise<void>>();
  private readonly policy;
  private readonly secrets: WebhookSecretStore;
  private readonly leaseMs: number;
  private claiming: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly notifications: PgNotifications,
    private readonly metrics: Metrics,
  ) {
    this.policy = webhookAddressPolicy(config.WEBHOOK_ALLOW_PRIVATE_ADDRESSES);
    this.secrets = new WebhookSecretStore(config.SERVER_CREDENTIALS_KEY);
    this.leaseMs = Math.max(1000, config.WORKER_LOCK_MS);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.notifications.subscribe(WEBHOOK_MESSAGE_CHANNEL, () => void this.wake());
    this.notifications.onReset(() => void this.wake());
    void this.wake();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([this.claiming, ...this.serving.values()]),
      new Promise<void>((resolve) => (bound = setTimeout(resolve, SHUTDOWN_WAIT_MS))),
    ]);
    clearTimeout(bound);
    // Endpoints still held are handed back at once (a cut-short attempt is sent again: at least once).
    await this.db.query('UPDATE webhooks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1', [this.me]).catch(() => undefined);
  }

  /** Claims endpoints with due messages and starts serving them (coalesced, one claim pass at a time per process). */
  wake(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.claiming) {
      this.again = true;
      return this.claiming;
    }
    this.claiming = (async () => {
      try {
        do {
          this.again = false;
          await this.claim();
        } while (this.again && !this.stopped);
        await this.schedule();
      } catch (err) {
        this.logger.warn(`webhooks: ${(err as Error).message}`);
        this.arm(MAX_IDLE_MS);
      } finally {
        this.claiming = null;
      }
    })();
    return this.claiming;
  }

  /** Deletes finished messages and attempts past the retention. */
  async prune(): Promise<{ messages: number; attempts: number; userEvents: number }> {
    const interval = `${WEBHOOK_RETENTION_DAYS} days`;
    const [, messages] = (await this.db.query(`DELETE FROM webhook_messages WHERE state <> 'pending' AND finished_at < now() - $1::interval`, [interval])) as [unknown, number];
    const [, attempts] = (await this.db.query(`DELETE FROM webhook_attempts WHERE attempted_at < now() - $1::interval`, [interval])) as [unknown, number];
    // The users' outbox has no other reader: its events go with the webhooks' retention.
    const userEvents = await pruneUserEvents(this.db.manager, WEBHOOK_RETENTION_DAYS);
    return { messages, attempts, userEvents };
  }

  private async claim(): Promise<void> {
    const free = this.config.WEBHOOK_CONCURRENCY - this.serving.size;
    if (free <= 0) return;
    const rows = (await this.db.query(
      `UPDATE webhooks SET lease_owner = $1, lease_until = now() + $2::interval
        WHERE id IN (
          SELECT w.id FROM webhooks w
           WHERE w.enabled AND (w.lease_until IS NULL OR w.lease_until < now()) AND NOT (w.id = ANY($3::uuid[]))
             AND EXISTS (SELECT 1 FROM webhook_messages m WHERE m.webhook_id = w.id AND m.next_attempt_at <= now() AND ${HEAD_OF_KEY})
           ORDER BY w.lease_until NULLS FIRST LIMIT $4 FOR UPDATE SKIP LOCKED)
        RETURNING id`,
      [this.me, `${this.leaseMs} milliseconds`, [...this.serving.keys()], free],
    )) as [Array<{ id: string }>, number];
    for (const { id } of rows[0]) {
      const run = this.serve(id).finally(() => {
        this.serving.delete(id);
      });
      this.serving.set(id, run);
    }
  }

  /** The next look: at the earliest retry or lease expiry of an endpoint this process does not serve (bounded). */
  private async schedule(): Promise<void> {
    if (this.stopped) return;
    if (this.serving.size >= this.config.WEBHOOK_CONCURRENCY) return this.arm(MAX_IDLE_MS);
    const [row] = (await this.db.query(
      `SELECT EXTRACT(EPOCH FROM (min(GREATEST(m.next_attempt_at, COALESCE(w.lease_until, m.next_attempt_at))) - now())) * 1000 AS wait_ms
         FROM webhook_messages m JOIN webhooks w ON w.id = m.webhook_id
        WHERE w.enabled AND NOT (w.id = ANY($1::uuid[])) AND ${HEAD_OF_KEY}`,
      [[...this.serving.keys()]],
    )) as Array<{ wait_ms: string | null }>;
    const wait = row?.wait_ms === null || row?.wait_ms === undefined ? MAX_IDLE_MS : Number(row.wait_ms);
    this.arm(Math.min(MAX_IDLE_MS, Math.max(MIN_IDLE_MS, Math.ceil(wait))));
  }

  private arm(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.wake();
    }, ms);
    this.timer.unref();
  }

  /** Serves one leased endpoint: its due messages, in order per key, until none is due, one fails, or the bound. */
  private async serve(webhookId: string): Promise<void> {
    let lost = false;
    const renew = setInterval(() => {
      this.db.query('UPDATE webhooks SET lease_until = now() + $3::interval WHERE id = $1 AND lease_owner = $2 RETURNING id', [webhookId, this.me, `${this.leaseMs} milliseconds`])
        .then((result: [unknown[], number]) => {
          if (result[1] === 0) lost = true;
        })
        .catch(() => undefined);
    }, Math.max(200, Math.floor(this.leaseMs / 3)));
    let sent = 0;
    try {
      for (let n = 0; sent < MAX_MESSAGES_PER_RUN && n < MAX_MESSAGES_PER_RUN && !this.stopped && !lost; n++) {
        const outcomes = await this.sendNext(webhookId);
        sent += outcomes.filter((o) => o === 'delivered').length;
        if (outcomes.length === 0 || outcomes.some((o) => o !== 'delivered')) break;
      }
    } catch (err) {
      this.logger.warn(`webhook ${webhookId}: ${(err as Error).message}`);
    } finally {
      clearInterval(renew);
      await this.db.query('UPDATE webhooks SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2', [webhookId, this.me]).catch(() => undefined);
      // Messages may have come while it served (their notice found it leased): look again after progress.
      if (sent > 0 || this.again) void this.wake();
      else this.arm(MIN_IDLE_MS);
    }
  }

  /**
   * The next due message of each of up to KEYS_IN_FLIGHT ordering keys, sent at once (each is the oldest pending of
   * its key, so order per key holds); answers their outcomes (none: nothing due).
   */
  private async sendNext(webhookId: string): Promise<Array<'delivered' | 'failed'>> {
    // The endpoint and its due messages are read at once: the first webhook of an event waits for both.
    const [[endpoint], messages] = (await Promise.all([
      this.db.query(
        `SELECT id, url, enabled, secret, previous_secret, previous_secret_until > now() AS previous_valid FROM webhooks WHERE id = $1`,
        [webhookId],
      ),
      this.db.query(
        `SELECT m.id, m.event_type, m.body, m.attempts, m.created_at FROM webhook_messages m
          WHERE m.webhook_id = $1 AND m.next_attempt_at <= now() AND ${HEAD_OF_KEY} ORDER BY m.id LIMIT $2`,
        [webhookId, KEYS_IN_FLIGHT],
      ),
    ])) as [EndpointRow[], MessageRow[]];
    if (!endpoint?.enabled) return [];
    return Promise.all(messages.map(async (message) => this.record(endpoint, message, await this.attempt(endpoint, message))));
  }

  /** One signed POST to the endpoint, to the address its name resolved to, if that address is allowed. */
  private async attempt(endpoint: EndpointRow, message: MessageRow): Promise<SendResult> {
    const started = performance.now();
    const url = new URL(endpoint.url);
    const check: AddressCheck = await this.policy.resolve(hostOf(url));
    if (check.allowed !== true) {
      const error = check.allowed === false ? `refused: ${check.reason}` : `cannot resolve ${url.hostname}: ${check.error}`;
      return { statusCode: null, durationMs: Math.round(performance.now() - started), error };
    }
    const secrets = [this.secrets.open(endpoint.secret, endpoint.id)];
    if (endpoint.previous_secret && endpoint.previous_valid) secrets.push(this.secrets.open(endpoint.previous_secret, endpoint.id));
    const msgId = `msg_${message.id}`;
    const now = new Date();
    const headers = {
      'webhook-id': msgId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signatures(secrets, msgId, now, message.body),
    };
    return send(url, check.address, headers, message.body);
  }

  /** The attempt's record and the message's next state, in one transaction (a 410 disables the endpoint). */
  private async record(endpoint: EndpointRow, message: MessageRow, result: SendResult): Promise<'delivered' | 'failed'> {
    const attempts = message.attempts + 1;
    const succeeded = result.error === null;
    await this.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO webhook_attempts (webhook_id, message_id, event_type, attempt, status_code, duration_ms, succeeded, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [endpoint.id, message.id, message.event_type, attempts, result.statusCode, result.durationMs, succeeded, result.error],
      );
      if (succeeded) {
        await tx.query(`UPDATE webhook_messages SET state = 'delivered', attempts = $2, last_error = NULL, finished_at = now() WHERE id = $1`, [message.id, attempts]);
      } else if (result.statusCode === 410) {
        await tx.query(`UPDATE webhook_messages SET state = 'failed', attempts = $2, last_error = $3, finished_at = now() WHERE id = $1`, [message.id, attempts, result.error]);
        await tx.query(`UPDATE webhooks SET enabled = false, disabled_reason = $2, updated_at = now() WHERE id = $1`, [endpoint.id, 'the receiver answered 410 Gone']);
        await cancelPending(tx, endpoint.id, 'the receiver answered 410 Gone');
      } else if (attempts >= this.config.WEBHOOK_MAX_ATTEMPTS) {
        await tx.query(`UPDATE webhook_messages SET state = 'failed', attempts = $2, last_error = $3, finished_at = now() WHERE id = $1`, [message.id, attempts, result.error]);
      } else {
        await tx.query(
          `UPDATE webhook_messages SET attempts = $2, last_error = $3, next_attempt_at = now() + $4::interval WHERE id = $1`,
          [message.id, attempts, result.error, `${webhookRetryDelayMs(this.config.WEBHOOK_RETRY_BASE_MS, attempts)} milliseconds`],
        );
      }
    });
    // Per attempt: delivered, retried (attempts left) or failed (the message gave up: 410 or the last attempt).
    const outcome = succeeded ? 'delivered' : result.statusCode === 410 || attempts >= this.config.WEBHOOK_MAX_ATTEMPTS ? 'failed' : 'retried';
    this.metrics.webhookDeliveries.inc({ outcome });
    this.metrics.webhookDeliveryDuration.observe({ outcome }, result.durationMs / 1000);
    if (!succeeded) this.logger.warn(`webhook ${endpoint.id}: msg_${message.id} (${message.event_type}) attempt ${attempts}: ${result.error}`);
    return succeeded ? 'delivered' : 'failed';
  }
}
