import { Type } from 'class-transformer';
import {
  IsBoolean, IsIn, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Matches, Max, MaxLength, Min, registerDecorator, ValidateNested, ValidationArguments,
} from 'class-validator';
import { isKnownTimeZone, parseLanguageTag, Settable } from '@ws/common';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED_ENV = new Set(['VNC_PASSWORD', 'X_RES', 'Y_RES', 'VNC_PORT', 'WORKSPACE_URL', 'LANG', 'TZ']);

/** A value the check accepts (a truthy answer); the message says what it must be. */
function Satisfies(check: (value: unknown) => unknown, mustBe: string) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'satisfies', target: object.constructor, propertyName,
      validator: { validate: (value: unknown) => Boolean(check(value)), defaultMessage: (args: ValidationArguments) => `${args.property} ${mustBe}` },
    });
}

/** An object of environment variables: names [A-Za-z_][A-Za-z0-9_]*, string values, bounded in count and size. */
export function IsEnvironment(maxEntries = 100, maxValueBytes = 32 * 1024) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isEnvironment',
      target: object.constructor,
      propertyName,
      validator: {
        validate(value: unknown) {
          return describeEnvironmentProblem(value, maxEntries, maxValueBytes) === null;
        },
        defaultMessage(args: ValidationArguments) {
          return `${args.property} ${describeEnvironmentProblem(args.value, maxEntries, maxValueBytes)}`;
        },
      },
    });
}

function describeEnvironmentProblem(value: unknown, maxEntries: number, maxValueBytes: number): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'must be an object of strings';
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > maxEntries) return `must have at most ${maxEntries} variables`;
  for (const [name, v] of entries) {
    if (!ENV_NAME.test(name)) return `has an invalid variable name (${name})`;
    if (RESERVED_ENV.has(name)) return `may not set ${name}; it is set by the service`;
    if (typeof v !== 'string') return `must map ${name} to a string`;
    if (Buffer.byteLength(v) > maxValueBytes) return `value of ${name} is larger than ${maxValueBytes} bytes`;
  }
  return null;
}

export class RequestWorkspaceRequest {
  @IsOptional() @IsString() @IsNotEmpty() user_id?: string;
  @IsOptional() @IsString() @IsNotEmpty() image_id?: string;
  @Settable() @IsBoolean() enable_sharing?: boolean;
  @IsOptional() @IsString() @MaxLength(8192) @Matches(/^https?:\/\/\S+$/, { message: 'workspace_url must be an http(s) url' }) workspace_url?: string;
  @IsOptional() @IsEnvironment() environment?: Record<string, string>;
  @IsOptional() @IsObject() connection_info?: Record<string, unknown>;
  @IsOptional() @IsString() @Satisfies(parseLanguageTag, 'must be a BCP 47 language tag such as en-US, es-419 or zh-Hant-TW') client_language?: string;
  @IsOptional() @IsString() @Satisfies(isKnownTimeZone, 'must be an IANA time zone name such as Europe/Berlin') client_timezone?: string;
  @IsOptional() @IsString() @IsNotEmpty() egress_gateway_id?: string;
  @IsOptional() @IsIn(['Enabled', 'Disabled', 'Reset']) persistent_profile_mode?: 'Enabled' | 'Disabled' | 'Reset';
  @IsOptional() @IsIn(['GUAC', 'RDP_CLIENT']) rdp_client_type?: 'GUAC' | 'RDP_CLIENT';
}

export class WorkspaceStatusRequest {
  @IsString() @IsNotEmpty() workspace_id!: string;
  /** Required (no star in the contract): missing, a 400 naming it, never a skipped owner check. */
  @IsString() @IsNotEmpty() user_id!: string;
  @Settable() @IsBoolean() skip_agent_check?: boolean;
}

export class WorkspaceRef {
  @IsString() @IsNotEmpty() workspace_id!: string;
}

/** A workspace and its owner: destroy, exec, screenshot, frame and bottleneck stats, RDP client connection. */
export class OwnedWorkspaceRef extends WorkspaceRef {
  /** Required (no star in the contract): missing, a 400 naming it, never a skipped owner check. */
  @IsString() @IsNotEmpty() user_id!: string;
}

export class ExecConfigFields {
  @IsString() @IsNotEmpty() @MaxLength(64 * 1024) cmd!: string;
  @IsOptional() @IsEnvironment(200) environment?: Record<string, string>;
  @IsOptional() @IsString() @MaxLength(4096) @Matches(/^\//, { message: 'workdir must be an absolute path' }) workdir?: string;
  @Settable() @IsBoolean() privileged?: boolean;
  @IsOptional() @IsString() user?: string;
}

export class ExecCommandRequest extends OwnedWorkspaceRef {
  @ValidateNested() @Type(() => ExecConfigFields) @IsObject() exec_config!: ExecConfigFields;
  /** Beyond the spec: wait for the command and answer its exit code and (bounded) output. */
  @Settable() @IsBoolean() wait?: boolean;
  @IsOptional() @IsInt() @Min(1) @Max(600) timeout_seconds?: number;
}

export class JoinWorkspaceRequest {
  @IsString() @IsNotEmpty() share_id!: string;
  @IsOptional() @IsString() @IsNotEmpty() user_id?: string;
}

export class WorkspaceClientRequest extends OwnedWorkspaceRef {
  /** none: server side only; auto: the owner's clients (default); all: every client; or one client id. */
  @IsOptional() @IsString() @MaxLength(64) client?: string;
}

export class ScreenshotRequest extends OwnedWorkspaceRef {
  @IsOptional() @IsInt() @Min(1) @Max(4096) width?: number;
  @IsOptional() @IsInt() @Min(1) @Max(4096) height?: number;
}
