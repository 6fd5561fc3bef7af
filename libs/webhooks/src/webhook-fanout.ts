import type { EntityManager } from 'typeorm';
import { webhookBody, WebhookEvent } from './webhook-events';

/**
 * One message per enabled endpoint that wants the event, inside the caller's transaction (the feed's, which also
 * advances its position in the outbox): each event becomes each endpoint's message exactly once. The insert
 * notifies `webhook_message` at commit, which wakes the dispatchers.
 */
export async function fanOut(tx: EntityManager, event: WebhookEvent): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_messages (webhook_id, event_type, ordering_key, body)
     SELECT id, $1, $2, $3 FROM webhooks WHERE enabled AND (cardinality(events) = 0 OR $1 = ANY(events)) ORDER BY created_at, id`,
    [event.type, event.orderingKey, webhookBody(event)],
  );
}
