import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsBoolean, IsDefined, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Max, MaxLength, Min, ValidateNested } from 'class-validator';
import { Settable } from '@ws/common';

/** Bounds that keep a typo from storing something no gateway could use. */
export const MAX_ACTIVE_CONNECTION_LIMIT = 1_000_000;
export const MAX_SELECTED_GATEWAYS = 1000;
const MAX_SECRET_LENGTH = 16 * 1024;
const MAX_ID_LENGTH = 64;

/**
 * update_egress_credential's `target_egress_credential`. Without `egress_credential_id` it creates a credential;
 * with it, omitted fields keep their value and null clears a nullable one. Which fields are required depends on
 * the others (the provider's type, allow_all_gateways, limit_active_connections): EgressCredentials checks them
 * on the merged result.
 */
export class EgressCredentialChanges {
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) egress_credential_id?: string;
  @Settable() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) egress_provider_id?: string;
  @Settable() @IsString() @IsNotEmpty() @MaxLength(256) name?: string;
  @Settable() @IsBoolean() enabled?: boolean;
  @Settable() @IsBoolean() allow_all_gateways?: boolean;
  @Settable() @IsArray() @ArrayMaxSize(MAX_SELECTED_GATEWAYS) @IsString({ each: true }) @MaxLength(MAX_ID_LENGTH, { each: true }) selected_gateways?: string[];
  @Settable() @IsBoolean() limit_active_connections?: boolean;
  /** null and 0 count as not given (a response sent back carries 0 when no limit was ever set). */
  @IsOptional() @IsInt() @Min(0) @Max(MAX_ACTIVE_CONNECTION_LIMIT) active_connection_limit?: number | null;
  /** The spec's parameter list names the limit `active_connections`; accepted as the same field. */
  @IsOptional() @IsInt() @Min(1) @Max(MAX_ACTIVE_CONNECTION_LIMIT) active_connections?: number | null;
  @IsOptional() @IsString() @MaxLength(1024) username?: string | null;
  @IsOptional() @IsString() @MaxLength(MAX_SECRET_LENGTH) password?: string | null;
  @IsOptional() @IsString() @MaxLength(MAX_SECRET_LENGTH) vpn_private_key?: string | null;
  @IsOptional() @IsString() @MaxLength(MAX_SECRET_LENGTH) mesh_key?: string | null;
  @IsOptional() @IsString() @MaxLength(MAX_SECRET_LENGTH) custom_credential?: string | null;
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) user_id?: string | null;
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) group_id?: string | null;
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) image_id?: string | null;
}

export class UpdateEgressCredentialRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => EgressCredentialChanges) target_egress_credential!: EgressCredentialChanges;
}

/** The credential to delete, under either of the spec's two names. */
export class EgressCredentialRef {
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) egress_provider_mapping_id?: string;
  @IsOptional() @IsString() @IsNotEmpty() @MaxLength(MAX_ID_LENGTH) egress_credential_id?: string;
}

export class DeleteEgressCredentialRequest {
  @IsDefined() @IsObject() @ValidateNested() @Type(() => EgressCredentialRef) target_egress_credential!: EgressCredentialRef;
}
