import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { PageRequest } from '@ws/database';
import {
  CreateWebhookRequest, toWebhookDeliveryResponse, toWebhookResponse, toWebhookWithSecret, UpdateWebhookRequest, WebhookDeliveriesRequest, WebhookRef,
  WebhooksService,
} from '@ws/webhooks';

@Controller('api/public')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Operation('create_webhook')
  async create(@Body() body: CreateWebhookRequest) {
    const { webhook, secret } = await this.webhooks.create(body.target_webhook);
    return { webhook: toWebhookWithSecret(webhook, secret) };
  }

  @Operation('get_webhooks')
  async list(@Body() body: PageRequest) {
    const { rows, paging } = await this.webhooks.list(body);
    return { webhooks: rows.map(toWebhookResponse), ...paging };
  }

  @Operation('update_webhook')
  async update(@Body() body: UpdateWebhookRequest) {
    return { webhook: toWebhookResponse(await this.webhooks.update(body.target_webhook)) };
  }

  @Operation('delete_webhook')
  async delete(@Body() body: WebhookRef) {
    await this.webhooks.delete(body.webhook_id);
    return {};
  }

  @Operation('rotate_webhook_secret')
  async rotate(@Body() body: WebhookRef) {
    const { webhook, secret } = await this.webhooks.rotateSecret(body.webhook_id);
    return { webhook: toWebhookWithSecret(webhook, secret) };
  }

  @Operation('get_webhook_deliveries')
  async deliveries(@Body() body: WebhookDeliveriesRequest) {
    const { rows, paging } = await this.webhooks.deliveries(body.webhook_id, body);
    return { deliveries: rows.map(toWebhookDeliveryResponse), ...paging };
  }
}
