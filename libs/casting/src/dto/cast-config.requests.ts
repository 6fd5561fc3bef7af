import { Type } from 'class-transformer';
import {
  ArrayMaxSize, IsArray, IsBoolean, IsDefined, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Matches, Max, MaxLength, Min, ValidateNested,
} from 'class-validator';
import { Settable } from '@ws/common';

/** Bounds that keep a typo from making a link that can never be limited or a list nobody can check. */
export const MAX_CAST_SESSIONS = 1_000_000;
export const MAX_IP_REQUEST_SECONDS = 366 * 86400;
const CAST_KEY = /^[A-Za-z0-9_-]{1,128}$/;
const HTTP_URL = /^https?:\/\/\S+$/;
/** `YYYY-MM-DD HH:MM:SS[.ffffff]` (UTC, as the spec prints timestamps) or ISO 8601 with a zone. */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:?\d{2})?$/;
const HOST = /^[A-Za-z0-9*]([A-Za-z0-9.*-]{0,252})(:\d{1,5})?$/;

/** The fields of a config besides its id, name and image (response-only ones excluded); all optional. */
class CastConfigFields {
  @Settable() @IsString() @Matches(CAST_KEY, { message: 'key must be 1-128 characters of A-Z, a-z, 0-9, _ and -' }) key?: string;
  @Settable() @IsArray() @ArrayMaxSize(200) @Matches(HOST, { each: true, message: 'allowed_referrers must be host names (optionally with :port)' }) allowed_referrers?: string[];
  @Settable() @IsInt() @Min(0) @Max(MAX_CAST_SESSIONS) session_remaining?: number;
  @Settable() @IsInt() @Min(1) @Max(MAX_CAST_SESSIONS) ip_request_limit?: number;
  @Settable() @IsInt() @Min(1) @Max(MAX_IP_REQUEST_SECONDS) ip_request_seconds?: number;
  @IsOptional() @IsString() @MaxLength(8192) @Matches(HTTP_URL, { message: 'error_url must be an http(s) url' }) error_url?: string | null;
  @IsOptional() @IsString() @IsNotEmpty() group_id?: string | null;
  @IsOptional() @IsString() @MaxLength(8192) @Matches(HTTP_URL, { message: 'workspace_url must be an http(s) url' }) workspace_url?: string | null;
  @IsOptional() @IsString() @Matches(TIMESTAMP, { message: 'valid_until must be a timestamp like 2026-12-31 23:59:59 (UTC)' }) valid_until?: string | null;
  @Settable() @IsBoolean() limit_sessions?: boolean;
  @Settable() @IsBoolean() limit_ips?: boolean;
  @Settable() @IsBoolean() enable_sharing?: boolean;
  @Settable() @IsBoolean() disable_control_panel?: boolean;
  @Settable() @IsBoolean() disable_tips?: boolean;
  @Settable() @IsBoolean() disable_fixed_res?: boolean;
  @Settable() @IsBoolean() allow_anonymous?: boolean;
  @Settable() @IsBoolean() require_recaptcha?: boolean;
  @Settable() @IsBoolean() dynamic_workspace_url?: boolean;
  @Settable() @IsBoolean() dynamic_container_network?: boolean;
  @Settable() @IsBoolean() allow_resume?: boolean;
  @Settable() @IsBoolean() enforce_client_settings?: boolean;
  @Settable() @IsBoolean() allow_workspace_audio?: boolean;
  @Settable() @IsBoolean() allow_workspace_uploads?: boolean;
  @Settable() @IsBoolean() allow_workspace_downloads?: boolean;
  @Settable() @IsBoolean() allow_workspace_clipboard_down?: boolean;
  @Settable() @IsBoolean() allow_workspace_clipboard_up?: boolean;
  @Settable() @IsBoolean() allow_workspace_microphone?: boolean;
  @Settable() @IsBoolean() allow_workspace_sharing?: boolean;
  @Settable() @IsBoolean() workspace_audio_default_on?: boolean;
  @Settable() @IsBoolean() workspace_ime_mode_default_on?: boolean;
}

/** create_cast_config: casting_config_name and image_id required. */
export class NewCastConfig extends CastConfigFields {
  @IsString() @IsNotEmpty() @MaxLength(256) casting_config_name!: string;
  @IsString() @IsNotEmpty() image_id!: string;
}

/** update_cast_config: the id plus any field of create; omitted fields keep their value, null clears a nullable one. */
export class CastConfigChanges extends CastConfigFields {
  @IsString() @IsNotEmpty() cast_config_id!: string;
  @Settable() @IsString() @IsNotEmpty() @MaxLength(256) casting_config_name?: string;
  @Settable() @IsString() @IsNotEmpty() image_id?: string;
}

export class CreateCastConfigRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => NewCastConfig) target_cast_config!: NewCastConfig;
}

export class UpdateCastConfigRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => CastConfigChanges) target_cast_config!: CastConfigChanges;
}

/** get_cast_config and delete_cast_config: the id at top level. */
export class CastConfigRef {
  @IsString() @IsNotEmpty() cast_config_id!: string;
}

/** POST /api/client/cast: the browser client's launch of a cast link (the N/O contract). */
export class CastLaunchRequest {
  @IsString() @Matches(CAST_KEY, { message: 'key must be 1-128 characters of A-Z, a-z, 0-9, _ and -' }) key!: string;
  @IsOptional() @IsString() @MaxLength(8192) @Matches(HTTP_URL, { message: 'workspace_url must be an http(s) url' }) workspace_url?: string;
  @IsOptional() @IsString() @MaxLength(128) @Matches(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, { message: 'container_network must be a Docker network name' }) container_network?: string;
  @IsOptional() @IsString() @MaxLength(8192) recaptcha_token?: string;
  @IsOptional() @IsString() @MaxLength(8192) session_jwt?: string;
  /** The page the visitor came from (the client's document.referrer): the launch request's own Referer is the client's page. */
  @IsOptional() @IsString() @MaxLength(8192) referrer?: string;
}
