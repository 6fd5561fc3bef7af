import { parseCpuAllocationMethod, parseRunConfig, parseVolumeMappings, RESERVED_ENV } from '@ws/agent';
import { ApiError, ErrorCode } from '@ws/common';
import type { ExecConfig } from './image.entity';

/**
 * Image fields (wire names) that need Images Modify Resources on top of Images Modify (spec, Permissions rule 7;
 * the spec's GPU count, uncompressed size and base URL have no column here). Images are saved by the operator's
 * CLI, which holds every permission; an API route that saves images passes its caller's permissions to
 * ImagesService.upsert/update and this rule applies.
 */
export const IMAGE_RESOURCE_FIELDS = [
  'cores', 'memory', 'cpu_allocation_method', 'container_registry', 'container_user', 'container_token', 'hash', 'volume_mappings', 'run_config', 'exec_config',
] as const;

/** Permissions saving these image fields needs (`creating`: a new image). */
export function permissionsToSaveImage(fields: readonly string[], creating: boolean): string[] {
  const needed = [creating ? 'Images Create' : 'Images Modify'];
  if (fields.some((f) => (IMAGE_RESOURCE_FIELDS as readonly string[]).includes(f))) needed.push('Images Modify Resources');
  return needed;
}

/** Refuses (403, naming what is missing) when `granted` lacks a permission saving `fields` needs. */
export function checkImagePermissions(fields: readonly string[], creating: boolean, granted: readonly string[]): void {
  if (granted.includes('Global Admin')) return;
  const missing = permissionsToSaveImage(fields, creating).filter((p) => !granted.includes(p));
  if (missing.length) {
    const resources = fields.filter((f) => (IMAGE_RESOURCE_FIELDS as readonly string[]).includes(f));
    throw new ApiError(ErrorCode.Forbidden, `Saving this image needs ${missing.join(' and ')}${resources.length ? ` (for ${resources.join(', ')})` : ''}`);
  }
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_COMMAND = 8192;

function checkCommand(value: unknown, what: string): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'string' || value.length > MAX_COMMAND || value.includes('\0')) throw new Error(`${what} must be a shell command of at most ${MAX_COMMAND} characters without NUL`);
}

function checkKeys(value: unknown, allowed: string[], what: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`${what} must be an object`);
  const unknown = Object.keys(value).filter((k) => !allowed.includes(k));
  if (unknown.length) throw new Error(`${what}.${unknown[0]} is not a field; fields: ${allowed.join(', ')}`);
  return value as Record<string, unknown>;
}

/** exec_config: `{first_launch: {environment, cmd}, go: {cmd}}`, nothing else. */
export function checkExecConfig(execConfig: unknown): void {
  const top = checkKeys(execConfig, ['first_launch', 'go'], 'exec_config');
  const first = checkKeys(top.first_launch, ['environment', 'cmd'], 'exec_config.first_launch');
  checkCommand(first.cmd, 'exec_config.first_launch.cmd');
  const env = checkKeys(first.environment, Object.keys((first.environment as object) ?? {}), 'exec_config.first_launch.environment');
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name)) throw new Error(`exec_config.first_launch.environment: ${JSON.stringify(name)} is not a variable name`);
    if ((RESERVED_ENV as readonly string[]).includes(name)) throw new Error(`exec_config.first_launch.environment: ${name} is set by the server`);
    if (typeof value !== 'string' || value.includes('\0')) throw new Error(`exec_config.first_launch.environment.${name} must be a string without NUL`);
  }
  checkCommand(checkKeys(top.go, ['cmd'], 'exec_config.go').cmd, 'exec_config.go.cmd');
}

export interface ImageLaunchSettings {
  runConfig?: unknown;
  volumeMappings?: unknown;
  cpuAllocationMethod?: unknown;
  execConfig?: ExecConfig | unknown;
}

/**
 * Checks an image's launch settings before it is saved: 400 with the image and the offending key named.
 * `allowedSecurityOpts`: WORKSPACE_SECURITY_OPTS_ALLOWED.
 */
export function checkImageLaunchSettings(friendlyName: string, settings: ImageLaunchSettings, allowedSecurityOpts: readonly string[]): void {
  try {
    if (settings.runConfig !== undefined) parseRunConfig(settings.runConfig, allowedSecurityOpts);
    if (settings.volumeMappings !== undefined) parseVolumeMappings(settings.volumeMappings);
    if (settings.cpuAllocationMethod !== undefined) parseCpuAllocationMethod(settings.cpuAllocationMethod);
    if (settings.execConfig !== undefined) checkExecConfig(settings.execConfig);
  } catch (err) {
    if (err instanceof Error) throw new ApiError(ErrorCode.InvalidRequest, `Image ${friendlyName}: ${err.message}`);
    throw err;
  }
}
