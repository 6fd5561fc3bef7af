import { IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

export class ActivateRequest {
  @IsString() @IsNotEmpty() @MaxLength(16 * 1024) activation_key!: string;
  /** Omitted (or null): the entitlement's limit. */
  @IsOptional() @IsInt() @Min(1) @Max(1_000_000) seats?: number | null;
  /** Used when the key leaves issued_to empty; otherwise it must match the key's (see LicensingService.activate). */
  @IsOptional() @IsString() @MaxLength(256) issued_to?: string | null;
}
