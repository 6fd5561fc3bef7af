import { ArrayMaxSize, IsArray, IsBoolean, IsNotEmpty, IsString } from 'class-validator';
import { Settable } from '@ws/common';

/** Workspaces one get_sessions_recordings may name. */
export const MAX_RECORDING_WORKSPACES = 500;

export class GetSessionRecordingsRequest {
  @IsString() @IsNotEmpty() target_workspace_id!: string;
  @Settable() @IsBoolean() preauth_download_link?: boolean;
}

export class GetSessionsRecordingsRequest {
  @IsArray() @ArrayMaxSize(MAX_RECORDING_WORKSPACES) @IsString({ each: true }) @IsNotEmpty({ each: true }) target_workspace_ids!: string[];
  @Settable() @IsBoolean() preauth_download_link?: boolean;
}
