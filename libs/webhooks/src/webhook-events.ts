/** Every event type a webhook can subscribe to (issue 22); an endpoint with no types gets them all. */
export const WEBHOOK_EVENT_TYPES = [
  'workspace.requested', 'workspace.running', 'workspace.failed', 'workspace.assigned', 'workspace.expired', 'workspace.stopping', 'workspace.destroyed',
  'user.created', 'user.updated', 'user.deleted',
  'staging.pool_filled',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** An event ready for fan-out: the body's fields, and the key whose events are delivered in order. */
export interface WebhookEvent {
  type: WebhookEventType;
  /** `workspace:<id>`, `user:<id>`, `staging:<id>`. */
  orderingKey: string;
  /** When the change committed (the outbox row's time). */
  occurredAt: Date;
  data: Record<string, unknown>;
}

/** The body every delivery carries: `{type, timestamp, data}` (Standard Webhooks' payload structure, ISO 8601 time). */
export function webhookBody(event: WebhookEvent): string {
  return JSON.stringify({ type: event.type, timestamp: event.occurredAt.toISOString(), data: event.data });
}
