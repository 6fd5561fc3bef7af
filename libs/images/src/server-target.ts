import { isIP } from 'node:net';
import { ApiError, ErrorCode } from '@ws/common';
import type { TargetAddressPolicy } from './target-address';

/** What a server image reaches instead of starting a container (issue 14). */
export const SERVER_PROTOCOLS = ['rdp', 'vnc', 'ssh'] as const;
export type ServerProtocol = (typeof SERVER_PROTOCOLS)[number];

/** How an RDP server image is reached: fixed web-native (GUAC), fixed native client (RDP_CLIENT), or the request's choice. */
export const RDP_CLIENT_OPTIONS = ['guac', 'rdp_client', 'user'] as const;
export type RdpClientOption = (typeof RDP_CLIENT_OPTIONS)[number];

/** connection_info fields an image may let a request override. */
export const OVERRIDABLE_FIELDS = ['host', 'port', 'username', 'password', 'domain'] as const;
export type OverridableField = (typeof OVERRIDABLE_FIELDS)[number];

export type RdpClientType = 'GUAC' | 'RDP_CLIENT';

/** A server image's target without its password (the password is stored encrypted, apart). */
export interface ServerTarget {
  protocol: ServerProtocol;
  host: string;
  port: number;
  /** May contain `{username}`, replaced by the requesting user's name. */
  usernameTemplate: string;
  domain: string;
  allowOverride: OverridableField[];
  rdpClient: RdpClientOption;
}

/** The settings a workspace uses to reach its server, after overrides and the username template. */
export interface ResolvedConnection {
  protocol: ServerProtocol;
  host: string;
  port: number;
  username: string;
  password: string;
  domain: string;
  /** Only for rdp; vnc and ssh are always web-native. */
  rdpClientType: RdpClientType | null;
}

const HOST_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;
const DEFAULT_PORTS: Record<ServerProtocol, number> = { rdp: 3389, vnc: 5900, ssh: 22 };
const MAX_TEXT = 256;

/** A DNS host name (RFC 1123 labels) or an IPv4/IPv6 address. */
export function isValidHost(host: string): boolean {
  if (isIP(host) !== 0) return true;
  if (host.length === 0 || host.length > 253) return false;
  const labels = host.endsWith('.') ? host.slice(0, -1).split('.') : host.split('.');
  return labels.every((label) => HOST_LABEL.test(label)) && !/^[0-9.]+$/.test(host);
}

const isValidPort = (port: unknown): port is number => typeof port === 'number' && Number.isInteger(port) && port >= 1 && port <= 65535;
/** Printable text without control characters (they would reach .rdp files and client command lines). */
const isPlainText = (value: string) => value.length <= MAX_TEXT && ![...value].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f);

/** Checks a server target an operator defines (CLI); throws Error with a message naming the bad field. */
export function checkServerTarget(input: {
  protocol: string; host: string; port?: number; usernameTemplate?: string; domain?: string; allowOverride?: string[]; rdpClient?: string;
}): ServerTarget {
  const protocol = input.protocol.toLowerCase();
  if (!(SERVER_PROTOCOLS as readonly string[]).includes(protocol)) throw new Error(`protocol must be one of ${SERVER_PROTOCOLS.join(', ')} (got ${input.protocol})`);
  if (!isValidHost(input.host)) throw new Error(`host must be a host name or an IP address (got ${input.host})`);
  const port = input.port ?? DEFAULT_PORTS[protocol as ServerProtocol];
  if (!isValidPort(port)) throw new Error(`port must be an integer from 1 to 65535 (got ${input.port})`);
  const usernameTemplate = input.usernameTemplate ?? '';
  if (!isPlainText(usernameTemplate)) throw new Error('username must be at most 256 printable characters');
  const domain = input.domain ?? '';
  if (!isPlainText(domain)) throw new Error('domain must be at most 256 printable characters');
  const allowOverride = [...new Set(input.allowOverride ?? [])];
  for (const field of allowOverride) {
    if (!(OVERRIDABLE_FIELDS as readonly string[]).includes(field)) throw new Error(`overridable fields are ${OVERRIDABLE_FIELDS.join(', ')} (got ${field})`);
  }
  const rdpClient = (input.rdpClient ?? 'guac').toLowerCase();
  if (!(RDP_CLIENT_OPTIONS as readonly string[]).includes(rdpClient)) throw new Error(`rdp client must be one of ${RDP_CLIENT_OPTIONS.join(', ')} (got ${input.rdpClient})`);
  if (protocol !== 'rdp' && rdpClient !== 'guac') throw new Error('an rdp client option only applies to rdp servers');
  return {
    protocol: protocol as ServerProtocol, host: input.host, port, usernameTemplate, domain,
    allowOverride: allowOverride as OverridableField[], rdpClient: rdpClient as RdpClientOption,
  };
}

const bad = (message: string) => new ApiError(ErrorCode.InvalidRequest, message);

/** request_workspace's rdp_client_type against the image's option: required when user selectable, refused when fixed to the other. */
export function chooseRdpClientType(target: ServerTarget, requested: unknown): RdpClientType | null {
  if (requested !== undefined && requested !== null && requested !== 'GUAC' && requested !== 'RDP_CLIENT') throw bad('rdp_client_type must be GUAC or RDP_CLIENT');
  const asked = (requested ?? undefined) as RdpClientType | undefined;
  if (target.protocol !== 'rdp') {
    if (asked === 'RDP_CLIENT') throw bad(`rdp_client_type RDP_CLIENT only applies to RDP servers; this image is a ${target.protocol.toUpperCase()} server`);
    return null;
  }
  if (target.rdpClient === 'user') {
    if (asked === undefined) throw bad('rdp_client_type is required for this image: GUAC (web native) or RDP_CLIENT (your own RDP client)');
    return asked;
  }
  const fixed: RdpClientType = target.rdpClient === 'guac' ? 'GUAC' : 'RDP_CLIENT';
  if (asked !== undefined && asked !== fixed) throw bad(`this image is reached with ${fixed} only; rdp_client_type ${asked} is not allowed`);
  return fixed;
}

/**
 * The connection a request_workspace makes: the image's target, the request's connection_info overrides where the
 * image allows them (each validated; a clear 400 otherwise), and `{username}` replaced by the requesting user's name.
 */
export function resolveConnection(
  target: ServerTarget, storedPassword: string, request: { connection_info?: unknown; rdp_client_type?: unknown }, username: string,
): ResolvedConnection {
  const info = request.connection_info ?? {};
  if (typeof info !== 'object' || info === null || Array.isArray(info)) throw bad('connection_info must be an object');
  const given = info as Record<string, unknown>;
  for (const field of Object.keys(given)) {
    if (!(OVERRIDABLE_FIELDS as readonly string[]).includes(field)) throw bad(`connection_info.${field} is not a connection setting (settings: ${OVERRIDABLE_FIELDS.join(', ')})`);
    if (!target.allowOverride.includes(field as OverridableField)) throw bad(`this image does not allow connection_info.${field} to be overridden`);
  }
  const text = (field: 'username' | 'password' | 'domain'): string | undefined => {
    const value = given[field];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || !isPlainText(value)) throw bad(`connection_info.${field} must be a string of at most ${MAX_TEXT} printable characters`);
    return value;
  };
  const host = given.host;
  if (host !== undefined && (typeof host !== 'string' || !isValidHost(host))) throw bad('connection_info.host must be a host name or an IP address');
  const port = given.port;
  if (port !== undefined && !isValidPort(port)) throw bad('connection_info.port must be an integer from 1 to 65535');
  const rdpClientType = chooseRdpClientType(target, request.rdp_client_type);
  const password = text('password');
  // The stored password answers only the image's own server: sent elsewhere, a VNC challenge's answer can be cracked
  // offline, and an SSH or RDP server the request picked would simply receive it.
  const elsewhere = (['host', 'port'] as const).filter((field) => given[field] !== undefined && given[field] !== target[field]);
  if (elsewhere.length > 0 && password === undefined && storedPassword !== '' && sessionModeOf({ protocol: target.protocol, rdpClientType }) !== 'relay') {
    const fields = elsewhere.map((field) => `connection_info.${field}`).join(' and ');
    throw bad(target.allowOverride.includes('password')
      ? `connection_info.password is required with ${fields}: the image's stored password is sent only to the image's own server`
      : `${fields} cannot be overridden without a password of the request's own, and this image does not allow connection_info.password: the image's stored password is sent only to the image's own server`);
  }
  return {
    protocol: target.protocol,
    host: (host as string | undefined) ?? target.host,
    port: (port as number | undefined) ?? target.port,
    username: text('username') ?? target.usernameTemplate.split('{username}').join(username),
    password: password ?? storedPassword,
    domain: text('domain') ?? target.domain,
    rdpClientType,
  };
}

/**
 * Request time (image add-server, request_workspace): the host as written and, for a name, every address it
 * resolves to, against the operator's policy; `field` names the host in the message (e.g. connection_info.host).
 * A name that does not resolve now passes: the worker resolves and checks it again before connecting.
 */
export async function checkTargetHost(policy: TargetAddressPolicy, host: string, field: string, code: ErrorCode = ErrorCode.InvalidRequest): Promise<void> {
  const check = await policy.resolve(host);
  if (check.allowed === false) {
    const resolves = isIP(host) === 0 && !policy.checkLiteral(host) ? 'resolves to' : 'is';
    throw new ApiError(code, `${field} ${host} is not an allowed server target: it ${resolves} ${check.reason}`);
  }
}

/**
 * How a server workspace reaches its server: `direct` (the stream gateway speaks RFB to a VNC server itself),
 * `bridge` (a container of the bridge image runs an RDP or SSH client on a streamed desktop) or `relay` (a container
 * relays a native RDP client's TCP connection, admitted by a short-lived credential).
 */
export type ServerSessionMode = 'direct' | 'bridge' | 'relay';

export function sessionModeOf(connection: Pick<ResolvedConnection, 'protocol' | 'rdpClientType'>): ServerSessionMode {
  if (connection.protocol === 'vnc') return 'direct';
  return connection.protocol === 'rdp' && connection.rdpClientType === 'RDP_CLIENT' ? 'relay' : 'bridge';
}
