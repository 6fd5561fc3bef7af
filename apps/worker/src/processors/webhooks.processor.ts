import { Injectable } from '@nestjs/common';
import { JobHandler } from '@ws/queue';
import { WebhookDispatcher } from '@ws/webhooks';

@Injectable()
export class WebhooksProcessor {
  constructor(private readonly dispatcher: WebhookDispatcher) {}

  @JobHandler('maintenance.prune-webhooks')
  prune() {
    return this.dispatcher.prune();
  }
}
