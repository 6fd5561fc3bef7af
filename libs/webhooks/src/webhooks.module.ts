import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Webhook, WebhookAttempt, WebhookFeedCursor, WebhookMessage } from './webhook.entity';
import { WebhooksService } from './webhooks.service';

/**
 * Webhook endpoints and their operations (api). The worker adds the feeds (WorkspaceWebhooks, UserWebhooksFeed)
 * and the WebhookDispatcher to its own providers.
 */
@Module({
  imports: [TypeOrmModule.forFeature([Webhook, WebhookMessage, WebhookAttempt, WebhookFeedCursor])],
  providers: [WebhooksService],
  exports: [WebhooksService],
})
export class WebhooksModule {}
