import { Type } from 'class-transformer';
import { IsBoolean, IsDefined, IsInt, IsNotEmpty, IsNumber, IsObject, IsPositive, IsString, Max, Min, ValidateNested } from 'class-validator';
import { Settable } from '@ws/common';

/** Upper bounds that keep a typo from asking for a thousand containers or a pool that never refreshes. */
export const MAX_STAGED_SESSIONS = 500;
export const MAX_EXPIRATION_HOURS = 24 * 365;

/** Flags every config may set; omitted on create they take the deployment's client-setting defaults. */
class StagingConfigFlags {
  @Settable() @IsBoolean() allow_workspace_audio?: boolean;
  @Settable() @IsBoolean() allow_workspace_uploads?: boolean;
  @Settable() @IsBoolean() allow_workspace_downloads?: boolean;
  @Settable() @IsBoolean() allow_workspace_clipboard_down?: boolean;
  @Settable() @IsBoolean() allow_workspace_clipboard_up?: boolean;
  @Settable() @IsBoolean() allow_workspace_microphone?: boolean;
}

export class NewStagingConfig extends StagingConfigFlags {
  @IsString() @IsNotEmpty() zone_id!: string;
  @IsString() @IsNotEmpty() image_id!: string;
  @IsInt() @Min(0) @Max(MAX_STAGED_SESSIONS) num_sessions!: number;
  /** Hours; a fraction is allowed (0.5 = 30 minutes). */
  @IsNumber({ allowNaN: false, allowInfinity: false }) @IsPositive() @Max(MAX_EXPIRATION_HOURS) expiration!: number;
}

/** update_staging_config: the id plus any field of create; omitted fields keep their value. */
export class StagingConfigChanges extends StagingConfigFlags {
  @IsString() @IsNotEmpty() staging_config_id!: string;
  @Settable() @IsString() @IsNotEmpty() zone_id?: string;
  @Settable() @IsString() @IsNotEmpty() image_id?: string;
  @Settable() @IsInt() @Min(0) @Max(MAX_STAGED_SESSIONS) num_sessions?: number;
  @Settable() @IsNumber({ allowNaN: false, allowInfinity: false }) @IsPositive() @Max(MAX_EXPIRATION_HOURS) expiration?: number;
}

export class StagingConfigRef {
  @IsString() @IsNotEmpty() staging_config_id!: string;
}

export class CreateStagingConfigRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => NewStagingConfig) target_staging_config!: NewStagingConfig;
}

export class UpdateStagingConfigRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => StagingConfigChanges) target_staging_config!: StagingConfigChanges;
}

export class StagingConfigRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => StagingConfigRef) target_staging_config!: StagingConfigRef;
}
