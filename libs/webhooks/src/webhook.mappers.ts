import { formatTimestamp, toWireId } from '@ws/common';
import type { Webhook, WebhookAttempt } from './webhook.entity';

/** A webhook as get_webhooks lists it: never its secret. */
export function toWebhookResponse(webhook: Webhook) {
  return {
    webhook_id: toWireId(webhook.id),
    url: webhook.url,
    events: webhook.events,
    description: webhook.description,
    enabled: webhook.enabled,
    disabled_reason: webhook.disabledReason,
    created: formatTimestamp(webhook.createdAt),
  };
}

/** create_webhook and rotate_webhook_secret: the one answer that shows the secret. */
export function toWebhookWithSecret(webhook: Webhook, secret: string) {
  return { ...toWebhookResponse(webhook), secret };
}

export function toWebhookDeliveryResponse(attempt: WebhookAttempt) {
  return {
    delivery_id: String(attempt.id),
    message_id: `msg_${attempt.messageId}`,
    event_type: attempt.eventType,
    attempt: attempt.attempt,
    status_code: attempt.statusCode,
    duration_ms: attempt.durationMs,
    succeeded: attempt.succeeded,
    error: attempt.error,
    attempted: formatTimestamp(attempt.attemptedAt),
  };
}
