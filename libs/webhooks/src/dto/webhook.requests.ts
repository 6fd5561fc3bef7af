import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsBoolean, IsDefined, IsIn, IsNotEmpty, IsObject, IsOptional, IsString, MaxLength, ValidateNested } from 'class-validator';
import { Settable } from '@ws/common';
import { PageRequest } from '@ws/database';
import { WEBHOOK_EVENT_TYPES } from '../webhook-events';

const EVENTS_MESSAGE = `events must be an array of event types (${WEBHOOK_EVENT_TYPES.join(', ')}); empty means all`;

/** create_webhook's target_webhook. */
export class NewWebhook {
  @IsString() @IsNotEmpty() @MaxLength(2048) url!: string;
  @IsArray() @ArrayMaxSize(WEBHOOK_EVENT_TYPES.length) @IsIn(WEBHOOK_EVENT_TYPES, { each: true, message: EVENTS_MESSAGE }) events!: string[];
  @IsOptional() @IsString() @MaxLength(1024) description?: string | null;
}

/** update_webhook's target_webhook: the id and any of url, events, description, enabled. */
export class WebhookChanges {
  @IsString() @IsNotEmpty() webhook_id!: string;
  @Settable() @IsString() @IsNotEmpty() @MaxLength(2048) url?: string;
  @Settable() @IsArray() @ArrayMaxSize(WEBHOOK_EVENT_TYPES.length) @IsIn(WEBHOOK_EVENT_TYPES, { each: true, message: EVENTS_MESSAGE }) events?: string[];
  @IsOptional() @IsString() @MaxLength(1024) description?: string | null;
  @Settable() @IsBoolean() enabled?: boolean;
}

export class CreateWebhookRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => NewWebhook) target_webhook!: NewWebhook;
}

export class UpdateWebhookRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => WebhookChanges) target_webhook!: WebhookChanges;
}

/** delete_webhook and rotate_webhook_secret. */
export class WebhookRef {
  @IsString() @IsNotEmpty() webhook_id!: string;
}

/** get_webhook_deliveries: one endpoint's attempts, newest first (the latest 100, or pages: limit, cursor). */
export class WebhookDeliveriesRequest extends PageRequest {
  @IsString() @IsNotEmpty() webhook_id!: string;
}
