import { isIP } from 'node:net';
import { InvalidContainerSpecError } from './errors';

/**
 * An image's launch settings as the operator saves them (`run_config`, `volume_mappings`,
 * `cpu_allocation_method`), parsed into what the container spec needs. The same parsers check a value when
 * the image is saved (refusing it with a message) and again at launch (a row edited by hand cannot slip past).
 * Shapes and rules: README "Image launch settings", docs/decisions.md.
 */

/** `run_config` keys: `docker run` flags in snake_case. */
export const RUN_CONFIG_KEYS = ['hostname', 'shm_size', 'devices', 'add_host', 'security_opt'] as const;

/** Keys refused by name: each would undo the workspace hardening or is set by the server itself. */
const HARDENING_KEYS = new Set([
  'privileged', 'cap_add', 'cap_drop', 'network', 'net', 'network_mode', 'pid', 'ipc', 'uts', 'userns', 'cgroupns', 'user', 'volume', 'volumes',
  'volumes_from', 'mount', 'mounts', 'tmpfs', 'runtime', 'device_cgroup_rule', 'sysctl', 'sysctls', 'read_only', 'init', 'pids_limit', 'cpus',
  'cpu_shares', 'cpu_quota', 'memory', 'memory_swap', 'env', 'environment', 'publish', 'ports', 'expose', 'name', 'label', 'labels', 'restart',
]);

/**
 * Security options that weaken the sandbox. Refused unless the operator lists them in
 * WORKSPACE_SECURITY_OPTS_ALLOWED. `privileged` and `no-new-privileges:false` are refused always.
 */
export const WEAKENING_SECURITY_OPTS = ['seccomp=unconfined', 'apparmor=unconfined', 'label=disable', 'systempaths=unconfined'] as const;

const HOST_LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const HOSTNAME = new RegExp(`^${HOST_LABEL}(?:\\.${HOST_LABEL})*$`);
const PROFILE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const SELINUX_LABEL = /^(user|role|type|level):[A-Za-z0-9_.:,-]{1,128}$/;
const SIZE = /^(\d+(?:\.\d+)?)\s*([bkmg]?)b?$/i;
const MIB = 1024 * 1024;
const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, m: MIB, g: 1024 * MIB };
const MAX_SHM_BYTES = 64 * 1024 * MIB;
const MAX_LIST = 32;

export interface DeviceMapping {
  pathOnHost: string;
  pathInContainer: string;
  /** Subset of "rwm". */
  cgroupPermissions: string;
}

/** run_config as applied to the container. */
export interface RunSettings {
  hostname?: string;
  shmSizeBytes?: number;
  devices?: DeviceMapping[];
  /** "name:address" entries for /etc/hosts. */
  extraHosts?: string[];
  /** Extra SecurityOpt entries (never one that undoes no-new-privileges). */
  securityOpt?: string[];
}

export type CpuAllocationMethod = 'Inherit' | 'Quotas' | 'Shares';
export const CPU_ALLOCATION_METHODS: readonly CpuAllocationMethod[] = ['Inherit', 'Quotas', 'Shares'];

const fail = (message: string): never => {
  throw new InvalidContainerSpecError(message);
};

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function stringList(value: unknown, what: string): string[] {
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.some((v) => typeof v !== 'string')) fail(`run_config.${what} must be a list of strings`);
  if ((list as string[]).length > MAX_LIST) fail(`run_config.${what} takes at most ${MAX_LIST} entries`);
  return list as string[];
}

/** A clean absolute path: no empty, "." or ".." segments, nothing Docker's "src:dst:mode" syntax would split on. */
function isCleanAbsolutePath(path: string): boolean {
  if (!path.startsWith('/') || path.length > 4096 || /[\0\n\r:,]/.test(path)) return false;
  if (path === '/') return true;
  return path.slice(1).split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

const isUnder = (path: string, roots: readonly string[]) => roots.some((root) => path === root || path.startsWith(`${root}/`));

/** "512m", "1g", "67108864" or a number of bytes. */
export function parseSize(value: unknown, what: string): number {
  let bytes: number | undefined;
  if (typeof value === 'number') bytes = value;
  else if (typeof value === 'string') {
    const m = SIZE.exec(value.trim());
    if (m) bytes = Number(m[1]) * SIZE_UNITS[m[2].toLowerCase()];
  }
  if (bytes === undefined || !Number.isFinite(bytes)) return fail(`${what} must be a size such as 512m or 1g, got ${JSON.stringify(value)}`);
  bytes = Math.floor(bytes);
  if (bytes < MIB || bytes > MAX_SHM_BYTES) fail(`${what} must be between 1m and 64g, got ${JSON.stringify(value)}`);
  return bytes;
}

/** `--device` syntax: /dev/host[:/dev/container[:rwm]]. */
function parseDevice(entry: string): DeviceMapping {
  const [pathOnHost, pathInContainer = pathOnHost, permissions = 'rwm', ...rest] = entry.split(':');
  if (rest.length) fail(`run_config.devices entry ${JSON.stringify(entry)} must look like /dev/dri or /dev/x:/dev/y:rwm`);
  if (!isCleanAbsolutePath(pathOnHost) || !pathOnHost.startsWith('/dev/')) fail(`run_config.devices: ${JSON.stringify(pathOnHost)} must be a path under /dev/`);
  if (!isCleanAbsolutePath(pathInContainer) || pathInContainer === '/') fail(`run_config.devices: container path ${JSON.stringify(pathInContainer)} must be an absolute path`);
  if (!/^(?!.*(.).*\1)[rwm]{1,3}$/.test(permissions)) fail(`run_config.devices: permissions ${JSON.stringify(permissions)} must be letters of rwm`);
  return { pathOnHost, pathInContainer, cgroupPermissions: permissions };
}

/** `--add-host` syntax: name:address. */
function parseExtraHost(entry: string): string {
  const at = entry.indexOf(':');
  const name = entry.slice(0, at);
  const address = entry.slice(at + 1);
  if (at < 1 || !HOSTNAME.test(name) || name.length > 253 || !isIP(address)) {
    fail(`run_config.add_host entry ${JSON.stringify(entry)} must look like name:address (an IPv4 or IPv6 address)`);
  }
  return `${name}:${address}`;
}

/** `--security-opt` entries; answers the normalized form ("key=value"), or null for a no-op. */
function parseSecurityOpt(entry: string, allowed: readonly string[]): string | null {
  const normalized = entry.trim().replace(/^(apparmor|seccomp|label|systempaths):/, '$1=');
  if (/^no-new-privileges(?:[:=]true)?$/.test(normalized)) return null; // always applied already
  if (/^no-new-privileges[:=]/.test(normalized)) return fail(`run_config.security_opt ${JSON.stringify(entry)} would undo the workspace hardening (no-new-privileges stays on)`);
  if ((WEAKENING_SECURITY_OPTS as readonly string[]).includes(normalized)) {
    if (!allowed.includes(normalized)) {
      fail(`run_config.security_opt ${JSON.stringify(entry)} weakens the workspace sandbox; the operator must list it in WORKSPACE_SECURITY_OPTS_ALLOWED first`);
    }
    return normalized;
  }
  const [key, value = ''] = normalized.split(/=(.*)/s);
  if (key === 'apparmor' && PROFILE_NAME.test(value)) return normalized;
  if (key === 'label' && SELINUX_LABEL.test(value)) return normalized;
  if (key === 'seccomp') return fail(`run_config.security_opt ${JSON.stringify(entry)}: custom seccomp profiles are not supported (Docker's default profile applies)`);
  return fail(`run_config.security_opt ${JSON.stringify(entry)} is not allowed; allowed: apparmor=<profile>, label=user|role|type|level:<value>, no-new-privileges, and ${WEAKENING_SECURITY_OPTS.join(', ')} when the operator allows them`);
}

/**
 * Parses and checks an image's run_config. `allowedSecurityOpts`: the operator's WORKSPACE_SECURITY_OPTS_ALLOWED.
 * Throws InvalidContainerSpecError naming the key.
 */
export function parseRunConfig(runConfig: unknown, allowedSecurityOpts: readonly string[] = []): RunSettings {
  if (runConfig === null || runConfig === undefined) return {};
  if (!isPlainObject(runConfig)) return fail('run_config must be an object');
  const settings: RunSettings = {};
  for (const [key, value] of Object.entries(runConfig)) {
    if (value === null || value === undefined) continue;
    switch (key) {
      case 'hostname':
        if (typeof value !== 'string' || value.length > 253 || !HOSTNAME.test(value)) fail(`run_config.hostname ${JSON.stringify(value)} is not a valid host name`);
        settings.hostname = value as string;
        break;
      case 'shm_size':
        settings.shmSizeBytes = parseSize(value, 'run_config.shm_size');
        break;
      case 'devices':
        settings.devices = stringList(value, key).map(parseDevice);
        break;
      case 'add_host':
        settings.extraHosts = stringList(value, key).map(parseExtraHost);
        break;
      case 'security_opt':
        settings.securityOpt = stringList(value, key).map((o) => parseSecurityOpt(o, allowedSecurityOpts)).filter((o): o is string => o !== null);
        break;
      default:
        if (HARDENING_KEYS.has(key)) fail(`run_config.${key} is not allowed: it would undo the workspace hardening or is set by the server`);
        fail(`run_config.${key} is not a supported option; supported: ${RUN_CONFIG_KEYS.join(', ')}`);
    }
  }
  return settings;
}

/** Values the `{username}`, `{user_id}` and `{image_id}` templates of volume_mappings take. */
export interface VolumeTemplateValues {
  username?: string | null;
  userId?: string | null;
  imageId?: string | null;
}

export interface VolumeMount {
  kind: 'bind' | 'volume';
  /** Host path (bind) or volume name (volume), templates filled in. */
  source: string;
  target: string;
  readOnly: boolean;
}

const TEMPLATE = /\{([^{}]*)\}/g;
const TEMPLATE_NAMES = new Set(['username', 'user_id', 'image_id']);
const VOLUME_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/** Host paths a workspace never gets: the engine's socket and state, kernel interfaces, host configuration. */
const FORBIDDEN_HOST_ROOTS = ['/proc', '/sys', '/dev', '/boot', '/etc', '/run', '/var/run', '/var/lib/docker', '/var/lib/containerd'];
const FORBIDDEN_CONTAINER_ROOTS = ['/proc', '/sys', '/dev'];

/**
 * A username as one path segment, injectively: bytes outside A-Z a-z 0-9 _ . - (and a leading dot) become
 * %XX, so "a/b", "a_b" and ".." never land on the same or a parent directory.
 */
export function usernameForPath(username: string): string {
  return escapeUsername(username, '%', (ch, index) => /[A-Za-z0-9_-]/.test(ch) || (ch === '.' && index > 0));
}

/**
 * A username as one object-key segment (libs/storage keys.ts: [A-Za-z0-9._=+@-], starting with a letter, digit
 * or "_"), injectively: bytes other than letters and digits (and "." or "-" after the first) become _XX, "_"
 * included, so "_" always starts an escape and distinct names stay distinct.
 */
export function usernameForKey(username: string): string {
  return escapeUsername(username, '_', (ch, index) => /[A-Za-z0-9]/.test(ch) || (/[.-]/.test(ch) && index > 0));
}

/** Each UTF-8 byte of `username` that `keep` refuses becomes `escape` and two upper-case hex digits; "" becomes `escape`00. */
function escapeUsername(username: string, escape: '%' | '_', keep: (ch: string, index: number) => boolean): string {
  const encoded = Array.from(Buffer.from(username, 'utf8'))
    .map((byte, index) => {
      const ch = String.fromCharCode(byte);
      return keep(ch, index) ? ch : `${escape}${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
  return encoded || `${escape}00`;
}

/**
 * Fills the `{username}`, `{user_id}` and `{image_id}` templates of `template` (ids as 32 hex digits, the
 * username through `encodeUsername`); an unknown template or a missing value throws naming `what`.
 */
export function fillPathTemplates(template: string, values: VolumeTemplateValues, what: string, encodeUsername: (username: string) => string = usernameForPath): string {
  return template.replace(TEMPLATE, (_, name: string) => {
    if (!TEMPLATE_NAMES.has(name)) return fail(`${what}: unknown template {${name}}; known: {username}, {user_id}, {image_id}`);
    const value = name === 'username' ? values.username : name === 'user_id' ? values.userId : values.imageId;
    if (!value) return fail(`${what} needs a user ({${name}}), but this workspace has none (a staged workspace has no user yet)`);
    return name === 'username' ? encodeUsername(value) : value.replace(/-/g, '');
  });
}

/**
 * Parses volume_mappings: `{ "<host path or volume name>": { "bind": "<container path>", "mode": "rw" | "ro" } }`.
 * A source starting with "/" is a bind mount, anything else a named volume. With `values`, templates are
 * filled in and the result checked; without (when saving), sample values stand in so the shape is checked.
 */
export function parseVolumeMappings(mappings: unknown, values?: VolumeTemplateValues): VolumeMount[] {
  if (mappings === null || mappings === undefined) return [];
  if (!isPlainObject(mappings)) return fail('volume_mappings must be an object of "<host path or volume name>": {"bind": "<container path>", "mode": "rw"|"ro"}');
  const entries = Object.entries(mappings);
  if (entries.length > MAX_LIST) fail(`volume_mappings takes at most ${MAX_LIST} entries`);
  const fill = values ?? { username: 'sample.user', userId: '0'.repeat(32), imageId: '0'.repeat(32) };
  const targets = new Set<string>();
  return entries.map(([template, options]) => {
    const what = `volume_mappings[${JSON.stringify(template)}]`;
    if (!isPlainObject(options)) return fail(`${what} must be an object {"bind": "<container path>", "mode": "rw"|"ro"}`);
    const unknown = Object.keys(options).filter((k) => k !== 'bind' && k !== 'mode');
    if (unknown.length) fail(`${what}: unknown field ${unknown[0]}; fields: bind, mode`);
    const { bind, mode = 'rw' } = options;
    if (typeof bind !== 'string' || !isCleanAbsolutePath(bind) || bind === '/' || bind.includes('{')) fail(`${what}.bind must be an absolute container path without "..", ":" or templates`);
    if (isUnder(bind as string, FORBIDDEN_CONTAINER_ROOTS)) fail(`${what}.bind may not be under ${FORBIDDEN_CONTAINER_ROOTS.join(', ')}`);
    if (targets.has(bind as string)) fail(`${what}.bind ${bind as string} is mounted twice`);
    targets.add(bind as string);
    if (mode !== 'rw' && mode !== 'ro') fail(`${what}.mode must be "rw" or "ro"`);
    const source = fillPathTemplates(template, fill, what);
    const kind = template.startsWith('/') ? 'bind' : 'volume';
    if (kind === 'bind') {
      if (!isCleanAbsolutePath(source)) fail(`${what}: host path ${JSON.stringify(source)} must be absolute, without "..", "." or empty segments, ":" or ","`);
      if (source === '/' || isUnder(source, FORBIDDEN_HOST_ROOTS)) fail(`${what}: host path ${source} is not allowed (not / nor under ${FORBIDDEN_HOST_ROOTS.join(', ')})`);
    } else if (!VOLUME_NAME.test(source)) {
      fail(`${what}: volume name ${JSON.stringify(source)} must be letters, digits, _ . - (use {user_id} rather than {username} in volume names)`);
    }
    return { kind, source, target: bind as string, readOnly: mode === 'ro' };
  });
}

export function parseCpuAllocationMethod(value: unknown, what = 'cpu_allocation_method'): CpuAllocationMethod {
  if (!(CPU_ALLOCATION_METHODS as readonly unknown[]).includes(value)) fail(`${what} must be one of ${CPU_ALLOCATION_METHODS.join(', ')}, got ${JSON.stringify(value)}`);
  return value as CpuAllocationMethod;
}

/** The image's method, or the server's when the image says Inherit (a server saying Inherit means Quotas). */
export function effectiveCpuAllocation(imageMethod: string | null | undefined, serverMethod: string | null | undefined): 'Quotas' | 'Shares' {
  const image = parseCpuAllocationMethod(imageMethod ?? 'Inherit', 'image cpu_allocation_method');
  if (image !== 'Inherit') return image;
  return parseCpuAllocationMethod(serverMethod ?? 'Quotas', 'server cpu_allocation_method') === 'Shares' ? 'Shares' : 'Quotas';
}
