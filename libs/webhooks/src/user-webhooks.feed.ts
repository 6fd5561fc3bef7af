import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { toWireId } from '@ws/common';
import { PgNotifications } from '@ws/database';
import { lastUserEventId, userEventsAfter } from '@ws/users';
import { fanOut } from './webhook-fanout';
import type { WebhookEventType } from './webhook-events';

const FEED = 'users';
/** The channel the user_events trigger notifies at each commit that added events (see the migration). */
export const USER_EVENT_CHANNEL = 'user_event';
const BATCH = 200;
/** Batches per wake; the next notice or the dispatcher's timer continues. */
const MAX_BATCHES = 10;

/**
 * The users' outbox (@ws/users user_events), turned into webhook messages (worker). One transaction per batch
 * holds this feed's cursor row (FOR UPDATE SKIP LOCKED: one worker at a time), writes the messages and advances
 * the cursor: each user event becomes one message per endpoint once, in commit order.
 */
@Injectable()
export class UserWebhooksFeed implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(UserWebhooksFeed.name);
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(@InjectDataSource() private readonly db: DataSource, private readonly notifications: PgNotifications) {}

  async onApplicationBootstrap(): Promise<void> {
    // A new deployment starts at the end of the outbox, as the workspace relay's subscribers do.
    await this.db.transaction(async (tx) => {
      await tx.query(
        'INSERT INTO webhook_feed_cursors (feed, last_event_id) VALUES ($1, $2) ON CONFLICT (feed) DO NOTHING',
        [FEED, await lastUserEventId(tx)],
      );
    });
    await this.notifications.subscribe(USER_EVENT_CHANNEL, () => void this.wake());
    this.notifications.onReset(() => void this.wake());
    void this.wake();
  }

  onModuleDestroy(): Promise<void> | void {
    this.stopped = true;
    return this.running ?? undefined;
  }

  wake(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        let batches = 0;
        do {
          this.again = false;
          while (batches++ < MAX_BATCHES && !this.stopped && (await this.relayBatch()) === BATCH);
        } while (this.again && !this.stopped && batches < MAX_BATCHES);
      } catch (err) {
        this.logger.warn(`user events: ${(err as Error).message}`);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  /** One batch; answers how many events it relayed (0: none, or another worker holds the feed). */
  private relayBatch(): Promise<number> {
    return this.db.transaction(async (tx) => {
      const [cursor] = (await tx.query('SELECT last_event_id FROM webhook_feed_cursors WHERE feed = $1 FOR UPDATE SKIP LOCKED', [FEED])) as Array<{ last_event_id: string }>;
      if (!cursor) return 0;
      const events = await userEventsAfter(tx, String(cursor.last_event_id), BATCH);
      for (const event of events) {
        await fanOut(tx, {
          type: `user.${event.type}` as WebhookEventType, orderingKey: `user:${event.userId}`, occurredAt: event.createdAt,
          data: { user_id: toWireId(event.userId), ...snake(event.payload) },
        });
      }
      if (events.length > 0) {
        await tx.query('UPDATE webhook_feed_cursors SET last_event_id = $2, updated_at = now() WHERE feed = $1', [FEED, events[events.length - 1].id]);
      }
      return events.length;
    });
  }
}

/** The outbox payload's fields on the wire (username, changed). */
function snake(payload: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(payload).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]));
}
