import type { WorkspaceContainerSpec } from './docker-host';
import { isKnownTimeZone, parseLanguageTag } from '@ws/common';
import { InvalidContainerSpecError } from './errors';
import { effectiveCpuAllocation, parseRunConfig, parseVolumeMappings } from './launch-settings';
import { LABELS } from './labels';
import { WORKSPACE_NETWORK } from './workspace-network';

/** Set by the server only; request environment cannot override them. */
export const RESERVED_ENV = ['VNC_PASSWORD', 'X_RES', 'Y_RES', 'VNC_PORT', 'AUDIO_PORT', 'AUDIO_INPUT_PORT'] as const;

export const DEFAULT_VNC_PORT = '5900/tcp';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PORT_VALUE = /^(\d{1,5})(?:\/(tcp|udp|sctp))?$/i;
const PORT_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const MIB = 1024 * 1024;

/** Region used for a bare language code when it is not the language code itself (en → en_US, not en_EN). */
const DEFAULT_REGION: Record<string, string> = {
  en: 'US', ja: 'JP', zh: 'CN', ko: 'KR', sv: 'SE', da: 'DK', el: 'GR', cs: 'CZ', uk: 'UA', he: 'IL', hi: 'IN',
  vi: 'VN', nb: 'NO', nn: 'NO', fa: 'IR', ar: 'EG', sl: 'SI', et: 'EE', ca: 'ES', ga: 'IE', ms: 'MY', sr: 'RS',
  eu: 'ES', gl: 'ES', ka: 'GE', kk: 'KZ', be: 'BY', bn: 'BD', ur: 'PK', sq: 'AL', hy: 'AM', lb: 'LU', af: 'ZA',
  sw: 'KE', ta: 'IN', te: 'IN', mr: 'IN', gu: 'IN', kn: 'IN', ml: 'IN', pa: 'IN', zu: 'ZA', xh: 'ZA', fil: 'PH',
};

export interface ContainerSpecImageAttribute {
  category: string;
  name: string;
  value: string;
}

/** The fields of Workspace / Image / Server that the spec needs (entities fit structurally). */
export interface BuildContainerSpecInput {
  workspace: {
    id: string;
    cores: number | string;
    memory: number | string;
    /** Becomes VNC_PASSWORD when given. */
    token?: string | null;
    /** Stored request environment; used when `environment` is not given. */
    environment?: Record<string, string> | null;
  };
  image: {
    /** Fills `{image_id}` in volume_mappings. */
    id?: string | null;
    /** Image reference. */
    name: string;
    isBrowser?: boolean | null;
    xRes?: number | null;
    yRes?: number | null;
    execConfig?: { first_launch?: { environment?: Record<string, string> | null } | null } | null;
    attributes?: ReadonlyArray<ContainerSpecImageAttribute> | null;
    restrictToNetwork?: boolean | null;
    networkName?: string | null;
    /** Checked subset of docker run options (launch-settings.ts). */
    runConfig?: Record<string, unknown> | null;
    /** Bind and volume mounts with {username}, {user_id}, {image_id} templates (launch-settings.ts). */
    volumeMappings?: Record<string, unknown> | null;
    /** Inherit (the server's), Quotas or Shares. */
    cpuAllocationMethod?: string | null;
  };
  server?: { publishHost?: string | null; cpuAllocationMethod?: string | null } | null;
  /** A network the launch chose (a cast visitor's container_network, allowed by the image); else the image's rule. */
  network?: string | null;
  /** The workspace's owner, for volume_mappings templates; none for a staged workspace. */
  user?: { id: string; username: string } | null;
  /** WORKSPACE_SECURITY_OPTS_ALLOWED (a list, or the comma-separated setting): sandbox-weakening security options the operator allows in run_config. */
  allowedSecurityOpts?: readonly string[] | string;
  /** This installation's deployment id (label). */
  deploymentId: string;
  /** Request environment (request_workspace's environment). */
  environment?: Record<string, string> | null;
  /** Browser images only → WORKSPACE_URL. */
  workspaceUrl?: string | null;
  /** e.g. "en-US" → LANG=en_US.UTF-8. */
  clientLanguage?: string | null;
  /** e.g. "Europe/Berlin" → TZ. */
  clientTimezone?: string | null;
  /** Default: a quarter of memory, between 64 MiB and 2 GiB. */
  shmSizeBytes?: number | null;
  /** Default true: no process in the container gains privileges through exec (setuid files, file capabilities). */
  noNewPrivileges?: boolean;
}

/** A BCP 47 tag as a POSIX locale: "en-US", "en_us", "de", "es-419", "zh-Hant" → en_US, en_US, de_DE, es_ES, zh_TW (.UTF-8); null when not a tag. */
export function localeFromLanguage(language: string | null | undefined): string | null {
  const tag = parseLanguageTag(language);
  if (!tag) return null;
  const { language: lang, script, region } = tag;
  // A POSIX locale names a country: a UN M.49 area (es-419) or no region takes the language's usual one.
  const country = region && /^[A-Z]{2}$/.test(region) ? region : (lang === 'zh' && script === 'Hant' ? 'TW' : DEFAULT_REGION[lang] ?? lang.toUpperCase());
  return `${lang}_${country}.UTF-8`;
}

/** The zone when the time zone database knows it ("Europe/Berlin", "UTC", "Etc/GMT+5", "EST5EDT"), else null. */
export function validTimezone(tz: string | null | undefined): string | null {
  return isKnownTimeZone(tz) ? tz : null;
}

function validUrl(url: string | null | undefined): string | null {
  if (typeof url !== 'string' || !url.trim()) return null;
  try {
    const u = new URL(url.trim());
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.toString() : null;
  } catch {
    return null;
  }
}

function positiveNumber(value: unknown, what: string): number {
  const n = typeof value === 'string' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) throw new InvalidContainerSpecError(`${what} must be a positive number, got ${String(value)}`);
  return n;
}

function resolution(value: number | null | undefined, fallback: number, what: string): string {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < 100 || n > 16384) throw new InvalidContainerSpecError(`${what} must be an integer between 100 and 16384, got ${String(n)}`);
  return String(n);
}

function copyEnvironment(target: Record<string, string>, source: Record<string, string> | null | undefined, what: string, skipReserved: boolean): void {
  for (const [key, value] of Object.entries(source ?? {})) {
    if (!ENV_NAME.test(key)) throw new InvalidContainerSpecError(`${what}: environment variable name ${JSON.stringify(key)} is not valid`);
    if (value === null || value === undefined) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw new InvalidContainerSpecError(`${what}: environment variable ${key} must be a string`);
    }
    const text = String(value);
    if (text.includes('\0')) throw new InvalidContainerSpecError(`${what}: environment variable ${key} contains NUL`);
    if (skipReserved && (RESERVED_ENV as readonly string[]).includes(key)) continue;
    target[key] = text;
  }
}

/** Port map from the image's `port_map` attributes (value "5900/tcp" or "5900"); vnc defaults to 5900/tcp. */
export function portsFromAttributes(attributes: ReadonlyArray<ContainerSpecImageAttribute> | null | undefined): Record<string, string> {
  const ports: Record<string, string> = {};
  for (const a of attributes ?? []) {
    if (a.category !== 'port_map') continue;
    const name = a.name.trim().toLowerCase();
    const m = PORT_VALUE.exec(String(a.value).trim());
    if (!PORT_NAME.test(name) || !m || Number(m[1]) < 1 || Number(m[1]) > 65535) {
      throw new InvalidContainerSpecError(`Image port_map entry ${JSON.stringify(a.name)} = ${JSON.stringify(a.value)} is not valid (expected e.g. vnc = 5900/tcp)`);
    }
    ports[name] = `${Number(m[1])}/${(m[2] ?? 'tcp').toLowerCase()}`;
  }
  if (!ports.vnc) ports.vnc = DEFAULT_VNC_PORT;
  return ports;
}

/** Container name for a workspace. */
export function containerNameFor(workspaceId: string): string {
  return `ws-${workspaceId.toLowerCase()}`;
}

/** Container name of a workspace's egress sidecar (its network namespace, the tunnel and the kill switch). */
export function egressSidecarNameFor(workspaceId: string): string {
  return `${containerNameFor(workspaceId)}-egress`;
}

/**
 * Pure: turns a workspace + image + server into the container spec. Environment precedence (later wins):
 * image exec_config.first_launch.environment < request environment < WORKSPACE_URL / LANG / TZ < X_RES, Y_RES,
 * VNC_PORT, AUDIO_PORT, AUDIO_INPUT_PORT, VNC_PASSWORD. Request environment cannot set the reserved names (they are dropped).
 */
export function buildContainerSpec(input: BuildContainerSpecInput): WorkspaceContainerSpec {
  const { workspace, image } = input;
  if (!workspace?.id) throw new InvalidContainerSpecError('workspace id is required');
  if (!image?.name) throw new InvalidContainerSpecError('image name is required');
  if (!input.deploymentId) throw new InvalidContainerSpecError('deploymentId is required');
  const cores = positiveNumber(workspace.cores, 'cores');
  const memoryBytes = Math.floor(positiveNumber(workspace.memory, 'memory'));
  const ports = portsFromAttributes(image.attributes);

  const env: Record<string, string> = {};
  copyEnvironment(env, image.execConfig?.first_launch?.environment, 'image exec_config', true);
  copyEnvironment(env, input.environment ?? workspace.environment, 'request', true);

  const url = image.isBrowser ? validUrl(input.workspaceUrl) : null;
  if (url) env.WORKSPACE_URL = url;
  const lang = localeFromLanguage(input.clientLanguage);
  if (lang) env.LANG = lang;
  const tz = validTimezone(input.clientTimezone);
  if (tz) env.TZ = tz;

  env.X_RES = resolution(image.xRes, 1280, 'xRes');
  env.Y_RES = resolution(image.yRes, 720, 'yRes');
  env.VNC_PORT = ports.vnc.split('/')[0];
  // The reference image's audio bridges listen where the image's port_map says (its defaults: 4901, 4902).
  if (ports.audio) env.AUDIO_PORT = ports.audio.split('/')[0];
  if (ports.audio_input) env.AUDIO_INPUT_PORT = ports.audio_input.split('/')[0];
  if (workspace.token) env.VNC_PASSWORD = workspace.token;

  const allowed = typeof input.allowedSecurityOpts === 'string' ? input.allowedSecurityOpts.split(',').map((o) => o.trim()).filter(Boolean) : input.allowedSecurityOpts;
  const run = parseRunConfig(image.runConfig, allowed);
  const mounts = parseVolumeMappings(image.volumeMappings, { username: input.user?.username, userId: input.user?.id, imageId: image.id });
  const shm = input.shmSizeBytes ?? run.shmSizeBytes ?? Math.min(2048 * MIB, Math.max(64 * MIB, Math.floor(memoryBytes / 4)));
  return {
    name: containerNameFor(workspace.id),
    image: image.name,
    cores,
    memoryBytes,
    env,
    labels: { [LABELS.workspaceId]: workspace.id, [LABELS.deploymentId]: input.deploymentId },
    ports,
    publishHost: input.server?.publishHost || '127.0.0.1',
    network: networkOf(image, input.network),
    shmSizeBytes: shm,
    noNewPrivileges: input.noNewPrivileges ?? true,
    cpuAllocation: effectiveCpuAllocation(image.cpuAllocationMethod, input.server?.cpuAllocationMethod),
    ...(run.hostname ? { hostname: run.hostname } : {}),
    ...(run.devices?.length ? { devices: run.devices } : {}),
    ...(run.extraHosts?.length ? { extraHosts: run.extraHosts } : {}),
    ...(run.securityOpt?.length ? { securityOpt: run.securityOpt } : {}),
    ...(mounts.length ? { mounts } : {}),
  };
}

/**
 * An image restricted to a network of the operator's always goes there (it wins over a launch's choice, which the
 * launch already refused when it differed); else the launch's choice, else the isolated workspace network.
 */
function networkOf(image: { name: string; restrictToNetwork?: boolean | null; networkName?: string | null }, chosen: string | null | undefined): string {
  if (image.restrictToNetwork) {
    if (!image.networkName) throw new Error(`The image ${image.name} is restricted to a network but names none (network_name)`);
    return image.networkName;
  }
  return chosen || WORKSPACE_NETWORK.name;
}
