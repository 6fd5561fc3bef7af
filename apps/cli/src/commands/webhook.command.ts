import { Command } from 'commander';
import { toWebhookResponse, toWebhookWithSecret, WEBHOOK_EVENT_TYPES, WebhooksService } from '@ws/webhooks';
import { collect, print, service } from '../context';

/** `webhook add|list|remove`: the operator's side of create_webhook, get_webhooks and delete_webhook (issue 22). */
export function registerWebhookCommands(program: Command): void {
  const webhook = program.command('webhook').description('signed webhook endpoints (Standard Webhooks)');

  webhook
    .command('add <url>')
    .description('add an endpoint; prints its signing secret once')
    .option('--event <type>', `an event type to deliver (repeat; none: all): ${WEBHOOK_EVENT_TYPES.join(', ')}`, collect, [])
    .option('--description <text>')
    .option('--json', 'print JSON')
    .action(async (url: string, o: { event: string[]; description?: string; json?: boolean }) => {
      const unknown = o.event.filter((e) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(e));
      if (unknown.length > 0) throw new Error(`unknown event type ${unknown.join(', ')} (known: ${WEBHOOK_EVENT_TYPES.join(', ')})`);
      const { webhook: made, secret } = await (await service(WebhooksService)).create({ url, events: o.event, description: o.description ?? null });
      print(toWebhookWithSecret(made, secret), o.json ?? false);
    });

  webhook
    .command('list')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      print((await (await service(WebhooksService)).list()).rows.map(toWebhookResponse), o.json ?? false);
    });

  webhook
    .command('remove <webhook_id>')
    .action(async (id: string) => {
      await (await service(WebhooksService)).delete(id);
      console.log(`removed ${id}`);
    });
}
