// What other libraries and the apps use of @ws/webhooks; everything else is internal to it.
export { CreateWebhookRequest, UpdateWebhookRequest, WebhookDeliveriesRequest, WebhookRef } from './dto/webhook.requests';
export { UserWebhooksFeed } from './user-webhooks.feed';
export { WebhookDispatcher, webhookRetryDelayMs } from './webhook-dispatcher.service';
export { WEBHOOK_EVENT_TYPES } from './webhook-events';
export type { WebhookEventType } from './webhook-events';
export { Webhook, WebhookAttempt, WebhookFeedCursor, WebhookMessage } from './webhook.entity';
export { toWebhookDeliveryResponse, toWebhookResponse, toWebhookWithSecret } from './webhook.mappers';
export { WebhooksModule } from './webhooks.module';
export { WebhooksService } from './webhooks.service';
export { WorkspaceWebhooks } from './workspace-webhooks.subscriber';
