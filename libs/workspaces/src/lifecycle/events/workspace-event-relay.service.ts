import { hostname } from 'node:os';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { PgNotifications } from '@ws/database';
import { OutboxSignal } from './outbox-signal';
import { retryDelayMs, WORKSPACE_EVENT_SUBSCRIBER_KEY, WorkspaceEventHandler, WorkspaceEventSubscriberOptions } from './workspace-event-subscriber';
import type { WorkspaceEventMessage, WorkspaceEventType } from './workspace-event-types';
import type { WorkspaceStatus } from '../../workspace.entity';

/** The channel the sequencer notifies when it gave events their positions (writers do not notify: see poll()). */
export const WORKSPACE_EVENT_CHANNEL = 'workspace_event';
/** How often the relay looks for committed events without a position (one probe of a partial index). */
const POLL_MS = 200;
/** Bound of one relay run per subscriber; the next notice or the repeat schedule continues. */
const MAX_EVENTS_PER_RUN = 500;
const DEFAULT_ATTEMPTS = 10;
const DEFAULT_BACKOFF_MS = 1000;
/** How long shutdown waits for the delivery in flight. */
const SHUTDOWN_WAIT_MS = 5000;
/** Bound of one sequencing batch, and of the batches per run. */
const SEQUENCE_BATCH = 1000;
const SEQUENCE_BATCHES_PER_RUN = 20;
/** Events and delivery records older than this are pruned. */
export const WORKSPACE_EVENT_RETENTION_DAYS = 7;

interface Subscriber extends Required<WorkspaceEventSubscriberOptions> {
  handle: WorkspaceEventHandler;
}

interface EventRow {
  id: string;
  seq: string;
  workspace_id: string;
  type: WorkspaceEventType;
  payload: Record<string, unknown>;
  created_at: Date;
}

type Step = 'delivered' | 'idle' | 'busy' | 'failed';

/**
 * Hands the workspace_events outbox to every @OnWorkspaceEvent subscriber of the worker, in delivery position
 * order (`seq`, which keeps each workspace's commit order), at least once. Writers take no lock: this relay's
 * sequencer gives committed events their positions (sequence()), one sequencer at a time. The position of each subscriber lives in
 * PostgreSQL (workspace_event_cursors): a killed worker or a lost Redis loses nothing, the next run starts
 * where the last commit left. One event is delivered per transaction, holding the subscriber's cursor row
 * (FOR UPDATE SKIP LOCKED): two workers never deliver to one subscriber at once, so never out of order.
 *
 * Woken by its poll for events without a position (every POLL_MS), by this process's own commits of events
 * (OutboxSignal), by the sequencer's notice (another worker gave positions), and by the repeat schedule of the `workspace-events.relay` job (the backstop).
 */
@Injectable()
export class WorkspaceEventRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(WorkspaceEventRelay.name);
  private readonly subscribers: Subscriber[] = [];
  private readonly me = `${hostname()}:${process.pid}`;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private poller: NodeJS.Timeout | null = null;
  private polling = false;
  private stopListening: () => void = () => undefined;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly notifications: PgNotifications,
    private readonly outbox: OutboxSignal,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.collectSubscribers();
    // A new subscriber starts at the end of the outbox: it sees what happens from its first deployment on.
    for (const { name } of this.subscribers) {
      await this.db.query(
        `INSERT INTO workspace_event_cursors (subscriber, last_event_id) SELECT $1, last_seq FROM workspace_event_sequencer WHERE id = 1 ON CONFLICT (subscriber) DO NOTHING`,
        [name],
      );
    }
    await this.notifications.subscribe(WORKSPACE_EVENT_CHANNEL, () => void this.wake());
    // Notices sent while the LISTEN connection was down are lost: catch up once it is back.
    this.notifications.onReset(() => void this.wake());
    // Events this process commits (a provision's `running`) are relayed at once, not at the next poll.
    this.stopListening = this.outbox.onCommitted(() => void this.wake());
    this.poller = setInterval(() => void this.poll(), POLL_MS);
    this.poller.unref();
    void this.wake();
  }

  /**
   * Wakes the relay when committed events wait for a position. Writers send no notice: PostgreSQL serialises the
   * commits of every transaction that notifies, which would be one more deployment-wide point on the hot path.
   * One probe at a time; an outage is the next probe's (the repeat schedule is the backstop).
   */
  private async poll(): Promise<void> {
    if (this.polling || this.running || this.stopped) return;
    this.polling = true;
    try {
      const [row] = (await this.db.query('SELECT EXISTS (SELECT 1 FROM workspace_events WHERE seq IS NULL) AS waiting')) as Array<{ waiting: boolean }>;
      if (row?.waiting) void this.wake();
    } catch {
      // PostgreSQL unreachable: the next probe tries again.
    } finally {
      this.polling = false;
    }
  }

  get subscriberNames(): string[] {
    return this.subscribers.map((s) => s.name);
  }

  /** Relays now; a wake during a run makes one more run after it (coalesced, never concurrent in one process). */
  wake(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.relayAll();
        } while (this.again && !this.stopped);
      } catch (err) {
        this.logger.warn(`relay: ${(err as Error).message}`);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  /**
   * At shutdown, before the database closes: no new deliveries, and the one in flight may finish (bounded; one
   * cut short is rolled back and delivered again by the next worker).
   */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.stopListening();
    if (this.poller) clearInterval(this.poller);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_WAIT_MS)));
    await Promise.race([this.running ?? Promise.resolve(), bound]);
    clearTimeout(timer);
  }

  /**
   * One pass over every subscriber, each up to MAX_EVENTS_PER_RUN events, after giving committed events their
   * positions. The subscribers are served side by side (each on its own connection and cursor, in its own order):
   * one after another, an event reached the last of them (the webhooks, say) only after every other subscriber's
   * transactions. The pass ends when every subscriber's has, so runs stay one at a time in a process.
   */
  async relayAll(): Promise<void> {
    for (let n = 0; n < SEQUENCE_BATCHES_PER_RUN && !this.stopped; n++) {
      if ((await this.sequence()) < SEQUENCE_BATCH) break;
    }
    const passes = await Promise.allSettled(this.subscribers.map(async (subscriber) => {
      for (let n = 0; n < MAX_EVENTS_PER_RUN && !this.stopped; n++) {
        if ((await this.deliverNext(subscriber)) !== 'delivered') break;
      }
    }));
    const failed = passes.find((pass): pass is PromiseRejectedResult => pass.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Gives the committed events that have no delivery position yet the next positions, in id order, up to
   * SEQUENCE_BATCH; answers how many. Its transaction holds the sequencer row (SKIP LOCKED: while another worker
   * sequences, this one does nothing), so positions commit in increasing order and a reader never passes one that
   * commits later. Per workspace the order holds because a workspace's later event is drawn (larger id) only after
   * its earlier one committed: whenever the later one is visible here, so is the earlier one. When it gave
   * positions it notifies, so every relay (also one that found a cursor busy) runs again.
   */
  async sequence(): Promise<number> {
    return this.db.transaction(async (tx) => {
      const [sequencer] = (await tx.query('SELECT last_seq FROM workspace_event_sequencer WHERE id = 1 FOR UPDATE SKIP LOCKED')) as Array<{ last_seq: string }>;
      if (!sequencer) return 0;
      const [, count] = (await tx.query(
        `UPDATE workspace_events e SET seq = $1::bigint + n.rn
           FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM (SELECT id FROM workspace_events WHERE seq IS NULL ORDER BY id LIMIT $2) u) n
          WHERE e.id = n.id`,
        [sequencer.last_seq, SEQUENCE_BATCH],
      )) as [unknown, number];
      if (count === 0) return 0;
      await tx.query('UPDATE workspace_event_sequencer SET last_seq = last_seq + $1 WHERE id = 1', [count]);
      await tx.query(`SELECT pg_notify($1, '')`, [WORKSPACE_EVENT_CHANNEL]);
      return count;
    });
  }

  /** Deletes events and delivery records past the retention. */
  async prune(): Promise<{ events: number; deliveries: number }> {
    const interval = `${WORKSPACE_EVENT_RETENTION_DAYS} days`;
    const [, deliveries] = (await this.db.query(`DELETE FROM workspace_event_deliveries WHERE delivered_at < now() - $1::interval`, [interval])) as [unknown, number];
    const [, events] = (await this.db.query(`DELETE FROM workspace_events WHERE created_at < now() - $1::interval`, [interval])) as [unknown, number];
    return { events, deliveries };
  }

  /** The next undelivered event of one subscriber, in a transaction holding its cursor. */
  private async deliverNext(subscriber: Subscriber): Promise<Step> {
    const runner = this.db.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      const step = await this.deliverIn(runner, subscriber);
      await runner.commitTransaction();
      return step;
    } catch (err) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw err;
    } finally {
      await runner.release();
    }
  }

  private async deliverIn(runner: QueryRunner, subscriber: Subscriber): Promise<Step> {
    const [cursor] = (await runner.query(
      `SELECT last_event_id, attempts, retry_after > now() AS waiting FROM workspace_event_cursors WHERE subscriber = $1 FOR UPDATE SKIP LOCKED`,
      [subscriber.name],
    )) as Array<{ last_event_id: string; attempts: number; waiting: boolean | null }>;
    if (!cursor) return 'busy'; // another worker is delivering to it
    if (cursor.waiting) return 'idle';
    const [row] = (await runner.query(
      `SELECT id, seq, workspace_id, type, payload, created_at FROM workspace_events WHERE seq > $1 AND type = ANY($2) ORDER BY seq LIMIT 1`,
      [cursor.last_event_id, subscriber.types],
    )) as EventRow[];
    if (!row) return 'idle';
    await runner.query('SAVEPOINT delivery');
    try {
      await subscriber.handle(toMessage(row), runner.manager);
    } catch (err) {
      await runner.query('ROLLBACK TO SAVEPOINT delivery');
      const attempts = cursor.attempts + 1;
      const message = (err as Error).message;
      if (attempts < subscriber.attempts) {
        this.logger.warn(`subscriber ${subscriber.name}: event ${row.id} (${row.type}) failed (attempt ${attempts} of ${subscriber.attempts}): ${message}`);
        await runner.query(
          `UPDATE workspace_event_cursors SET attempts = $2, retry_after = now() + $3::interval, last_error = $4, updated_at = now() WHERE subscriber = $1`,
          [subscriber.name, attempts, `${retryDelayMs(subscriber.backoffMs, attempts)} milliseconds`, message],
        );
        return 'failed';
      }
      this.logger.error(`subscriber ${subscriber.name}: gave up on event ${row.id} (${row.type}) after ${attempts} attempts: ${message}`);
      await this.advance(runner, subscriber, row, true, message);
      return 'delivered';
    }
    await this.advance(runner, subscriber, row, false, null);
    return 'delivered';
  }

  private async advance(runner: QueryRunner, subscriber: Subscriber, row: EventRow, failed: boolean, error: string | null): Promise<void> {
    await runner.query(
      `UPDATE workspace_event_cursors SET last_event_id = $2, attempts = 0, retry_after = NULL, last_error = $3, updated_at = now() WHERE subscriber = $1`,
      [subscriber.name, row.seq, error],
    );
    await runner.query(
      `INSERT INTO workspace_event_deliveries (subscriber, event_id, workspace_id, failed, delivered_by) VALUES ($1, $2, $3, $4, $5)`,
      [subscriber.name, row.id, row.workspace_id, failed, this.me],
    );
  }

  private collectSubscribers(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const options = this.reflector.get<WorkspaceEventSubscriberOptions | undefined>(WORKSPACE_EVENT_SUBSCRIBER_KEY, (instance[method] as () => unknown) ?? {});
        if (!options) continue;
        if (this.subscribers.some((s) => s.name === options.name)) throw new Error(`Two workspace event subscribers named ${options.name}`);
        this.subscribers.push({
          attempts: DEFAULT_ATTEMPTS, backoffMs: DEFAULT_BACKOFF_MS, ...options,
          handle: (instance[method] as WorkspaceEventHandler).bind(instance),
        });
      }
    }
    this.logger.log(`workspace event subscribers: ${this.subscriberNames.join(', ') || 'none'}`);
  }
}

function toMessage(row: EventRow): WorkspaceEventMessage {
  return {
    id: String(row.id), workspaceId: row.workspace_id, type: row.type, status: row.payload.status as WorkspaceStatus, payload: row.payload, createdAt: row.created_at,
  };
}
