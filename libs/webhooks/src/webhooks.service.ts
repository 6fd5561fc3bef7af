import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { ApiError, AppConfig, ErrorCode, newId, parseId } from '@ws/common';
import { creationOrder, KeysetList, listPage, PageAnswer, PageRequest } from '@ws/database';
import type { NewWebhook, WebhookChanges } from './dto/webhook.requests';
import { hostOf, webhookAddressPolicy } from './webhook-address';
import { newWebhookSecret, WebhookSecretStore } from './webhook-secrets';
import { Webhook, WebhookAttempt } from './webhook.entity';

/** How long the secret before a rotation keeps signing deliveries (issue 22: 24 hours). */
export const PREVIOUS_SECRET_HOURS = 24;
const DEFAULT_DELIVERIES = 100;
const WEBHOOKS_LIST: KeysetList = { name: 'webhooks', from: 'webhooks w', keys: creationOrder('w') };

/**
 * The webhook operations: endpoints, their secrets and their delivery record. Nothing here sends: deliveries are
 * made by the worker (WebhookDispatcher) from the messages the event feeds wrote.
 */
@Injectable()
export class WebhooksService {
  private readonly policy;
  private readonly secrets: WebhookSecretStore;

  constructor(@InjectDataSource() private readonly db: DataSource, config: AppConfig) {
    this.policy = webhookAddressPolicy(config.WEBHOOK_ALLOW_PRIVATE_ADDRESSES);
    this.secrets = new WebhookSecretStore(config.SERVER_CREDENTIALS_KEY);
  }

  /** Every endpoint in creation order, or one page of them (`limit`, `cursor`: @ws/database keyset pages). */
  list(request: PageRequest = {}): Promise<{ rows: Webhook[]; paging: PageAnswer }> {
    const repo = this.db.getRepository(Webhook);
    return listPage(this.db, WEBHOOKS_LIST, request, () => repo.find({ order: { createdAt: 'ASC', id: 'ASC' } }), (ids) => repo.findBy({ id: In(ids) }));
  }

  async get(webhookId: string): Promise<Webhook> {
    const id = parseId(webhookId);
    const webhook = id ? await this.db.getRepository(Webhook).findOneBy({ id }) : null;
    if (!webhook) throw ApiError.invalidId('webhook_id', webhookId);
    return webhook;
  }

  /** The new endpoint and its secret (shown only in this answer and rotate's). */
  async create(fields: NewWebhook): Promise<{ webhook: Webhook; secret: string }> {
    const url = await this.checkUrl(fields.url, 'url');
    const id = newId();
    const secret = newWebhookSecret();
    await this.db.getRepository(Webhook).insert({
      id, url, events: unique(fields.events), description: fields.description ?? null, enabled: true, disabledReason: null,
      secret: this.secrets.seal(secret, id), previousSecret: null, previousSecretUntil: null, leaseOwner: null, leaseUntil: null,
    });
    return { webhook: await this.get(id), secret };
  }

  /** Changes url, events, description or enabled; disabling drops the deliveries still pending. */
  async update(changes: WebhookChanges): Promise<Webhook> {
    const webhook = await this.get(changes.webhook_id);
    const set: Partial<Webhook> = {};
    if (changes.url !== undefined) set.url = await this.checkUrl(changes.url, 'url');
    if (changes.events !== undefined) set.events = unique(changes.events);
    if (changes.description !== undefined) set.description = changes.description;
    if (changes.enabled !== undefined) {
      set.enabled = changes.enabled;
      set.disabledReason = null;
    }
    await this.db.transaction(async (tx) => {
      if (Object.keys(set).length > 0) await tx.update(Webhook, { id: webhook.id }, set);
      if (changes.enabled === false) await cancelPending(tx, webhook.id, 'the endpoint was disabled');
    });
    return this.get(webhook.id);
  }

  async delete(webhookId: string): Promise<void> {
    const webhook = await this.get(webhookId);
    await this.db.getRepository(Webhook).delete({ id: webhook.id });
  }

  /** A new secret; the one before keeps signing (a second signature) for PREVIOUS_SECRET_HOURS. */
  async rotateSecret(webhookId: string): Promise<{ webhook: Webhook; secret: string }> {
    const webhook = await this.get(webhookId);
    const secret = newWebhookSecret();
    await this.db.query(
      `UPDATE webhooks SET previous_secret = secret, previous_secret_until = now() + $2::interval, secret = $3, updated_at = now() WHERE id = $1`,
      [webhook.id, `${PREVIOUS_SECRET_HOURS} hours`, this.secrets.seal(secret, webhook.id)],
    );
    return { webhook: await this.get(webhook.id), secret };
  }

  /**
   * The endpoint's delivery attempts, newest first: the latest DEFAULT_DELIVERIES, or pages of them (`limit`,
   * `cursor`; attempts made during a walk come before its cursor, so the walk neither repeats nor skips one).
   */
  async deliveries(webhookId: string, request: PageRequest = {}): Promise<{ rows: WebhookAttempt[]; paging: PageAnswer }> {
    const webhook = await this.get(webhookId);
    const repo = this.db.getRepository(WebhookAttempt);
    const list: KeysetList = { name: 'webhook_deliveries', from: 'webhook_attempts a', keys: [{ column: 'a.id', type: 'bigint' }], where: 'a.webhook_id = $1', params: [webhook.id], descending: true };
    return listPage(this.db, list, request, () => repo.find({ where: { webhookId: webhook.id }, order: { id: 'DESC' }, take: DEFAULT_DELIVERIES }), (ids) => repo.findBy({ id: In(ids) }));
  }

  /** http(s) only; the host as written and as resolved must be allowed (a name that does not resolve yet is checked at delivery). */
  private async checkUrl(value: string, field: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ApiError(ErrorCode.InvalidRequest, `${field} is not a valid url (${value})`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ApiError(ErrorCode.InvalidRequest, `${field} must be an http(s) url (${value})`);
    const check = await this.policy.resolve(hostOf(url));
    if (check.allowed === false) throw new ApiError(ErrorCode.InvalidRequest, `${field} (${url.host}) is refused: ${check.reason}`);
    return url.toString();
  }
}

function unique(events: string[]): string[] {
  return [...new Set(events)];
}

/** Pending deliveries of an endpoint that stopped: they are not sent later (a re-enabled endpoint gets new events only). */
export async function cancelPending(tx: EntityManager, webhookId: string, reason: string): Promise<void> {
  await tx.query(
    `UPDATE webhook_messages SET state = 'cancelled', last_error = COALESCE(last_error, $2), finished_at = now() WHERE webhook_id = $1 AND state = 'pending'`,
    [webhookId, reason],
  );
}
