import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import type { Duplex, Readable, Writable } from 'node:stream';
import Docker from 'dockerode';
import { LABELS } from './labels';
import {
  AgentError,
  classifyDockerError,
  ClassifyContext,
  ContainerConflictError,
  ContainerNotFoundError,
  ContainerPathNotFoundError,
  daemonMessageOf,
  DockerDaemonError,
  DockerTimeoutError,
  ExecTimeoutError,
  ExecUserNotAllowedError,
  httpStatusOf,
  InvalidContainerSpecError,
  InvalidDockerEndpointError,
  InvalidExecOptionsError,
} from './errors';
import { waitForRfb, WaitForRfbOptions } from './rfb';
import { DockerFrameReader, DockerOutputCollector } from './stream-demux';

// ---------------------------------------------------------------------------------------------------------------
// Types

export interface WorkspaceContainerSpec {
  /** Deterministic container name (e.g. ws-<workspaceId>): a retried create finds the same container. */
  name: string;
  /** Local image reference; never pulled. */
  image: string;
  /** CPU cores (fractions allowed) → HostConfig.NanoCpus. */
  cores: number;
  /** Memory limit; swap is disabled (MemorySwap = Memory). */
  memoryBytes: number;
  env: Record<string, string>;
  labels: Record<string, string>;
  /** Port name → container port, e.g. { vnc: '5900/tcp' }; each is published on publishHost with an ephemeral port. */
  ports: Record<string, string>;
  /** Host address ports are published on (default 127.0.0.1). */
  publishHost?: string;
  network?: string | null;
  /**
   * Join this container's network namespace instead (NetworkMode container:<id>; an egress sidecar): `network`,
   * published ports, hostname and extra hosts are the other container's, so none are set here.
   */
  networkContainer?: string | null;
  shmSizeBytes?: number | null;
  /** Container user; default: the image's USER. */
  user?: string | null;
  /** The command instead of the image's CMD (a server session's RDP relay runs in the bridge image). */
  cmd?: string[] | null;
  /** The entrypoint instead of the image's (a network holder sleeps in whatever image it is given). */
  entrypoint?: string[] | null;
  /** Default 2048 (counts threads, so browsers need headroom). */
  pidsLimit?: number;
  /** Capabilities kept after CapDrop ALL (bounding set); default DEFAULT_CAP_ADD. */
  capAdd?: string[];
  /**
   * SecurityOpt no-new-privileges (default true). Trade-off measured on Docker 20.10: with it, `exec` as root
   * runs as uid 0 but with NO effective capabilities (cannot chown, cannot bypass file permissions); without it,
   * root execs get the capAdd set while the image's own user still has no effective capabilities.
   */
  noNewPrivileges?: boolean;
  /** Run docker-init as PID 1 to reap zombies (default true). */
  init?: boolean;
  /** Quotas (default): a hard limit of `cores` (NanoCpus); Shares: CpuShares = cores × 1024, no hard limit. */
  cpuAllocation?: 'Quotas' | 'Shares';
  /** From the image's run_config (launch-settings.ts checked them). */
  hostname?: string | null;
  devices?: Array<{ pathOnHost: string; pathInContainer: string; cgroupPermissions: string }>;
  /** "name:address" lines for /etc/hosts. */
  extraHosts?: string[];
  /** Added to no-new-privileges; never one that undoes it. */
  securityOpt?: string[];
  /** From the image's volume_mappings, templates filled in. */
  mounts?: Array<{ kind: 'bind' | 'volume'; source: string; target: string; readOnly: boolean }>;
  /** Docker's health check (Config.Healthcheck): a command run in the container; inspect's `health` reads its verdict. */
  healthcheck?: { cmd: string[]; intervalMs: number; timeoutMs: number; retries: number; startPeriodMs: number } | null;
}

export interface CreatedContainer {
  containerId: string;
  /** False when a container of that name already existed (retried job) and was adopted. */
  created: boolean;
}

export interface ContainerState {
  id: string;
  name: string;
  image: string;
  running: boolean;
  /** Docker's State.Status: created, running, paused, restarting, removing, exited, dead. */
  status: string;
  /** Container address on its network (informational only; reach the container via hostPorts). */
  ip: string | null;
  /** Published host port per port name. */
  hostPorts: Record<string, number>;
  exitCode: number | null;
  startedAt: Date | null;
  finishedAt: Date | null;
  oomKilled: boolean;
  error: string | null;
  labels: Record<string, string>;
  /** Docker's health (State.Health.Status) of a container with a health check: starting, healthy, unhealthy; else null. */
  health: string | null;
}

export interface ContainerSummary {
  id: string;
  name: string;
  image: string;
  labels: Record<string, string>;
  /** created, running, exited … */
  state: string;
  /** Human readable, e.g. "Up 3 minutes". */
  status: string;
  createdAt: Date;
}

export interface ExecOptions {
  /** Run as `/bin/sh -c <cmd>`. */
  cmd: string;
  environment?: Record<string, string>;
  /** Absolute path; default the image's WORKDIR. */
  workdir?: string;
  /**
   * Docker's privileged exec. Cannot exceed the container's bounding set: on a CapDrop'ed container (and on this
   * engine even with default caps) it ends with exit code 126 and the OCI error in stdout.
   */
  privileged?: boolean;
  /** Omitted: the image's sandboxed user. 'root': root. Anything else is rejected before calling Docker. */
  user?: 'root';
  /** Default true. */
  wait?: boolean;
  /** Per stream; default 64 KiB. */
  maxOutputBytes?: number;
  /** Default 60 s; covers create, run and exit code. */
  timeoutMs?: number;
}

export interface ExecResult {
  execId: string;
  exitCode: number;
  stdout: string;
  stderr: string;
  /** Either stream exceeded maxOutputBytes. */
  truncated: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** Bytes produced (including dropped ones). */
  stdoutBytes: number;
  stderrBytes: number;
  durationMs: number;
}

export interface DetachedExec {
  execId: string;
}

export interface StreamExecOptions {
  /** Run as `/bin/sh -c <cmd>`, always as the container's configured (sandboxed) user. */
  cmd: string;
  environment?: Record<string, string>;
  /** Attach the process's standard input (written through `stdin`). Default false. */
  stdin?: boolean;
  /** Stderr kept for `wait`'s answer; default 64 KiB. */
  maxStderrBytes?: number;
}

/** A process running in a container with its standard streams connected as they flow (see DockerHost.execStream). */
export interface StreamingExec {
  execId: string;
  /** The process's standard input (with `stdin: true`): writes reach it in order, end() closes it. */
  stdin: Writable;
  /** The process's standard output as it arrives; reading slowly slows the process down. Ends when it exits. */
  stdout: Readable;
  /**
   * Waits, at most timeoutMs in all, until the process's output was delivered and it exited: its exit code and the
   * kept stderr. Past the bound: ExecTimeoutError (the connection is dropped; the process may still run).
   */
  wait(timeoutMs: number): Promise<{ exitCode: number; stderr: string }>;
  /** Drops the connection: the process sees its stdin close and its further output is discarded. */
  close(): void;
}

export interface DockerInfo {
  ncpu: number;
  memTotal: number;
  serverVersion: string;
  name: string;
  operatingSystem: string;
  /** The engine's labels (dockerd --label k=v), e.g. workspace-server.isolated-bridge. */
  labels: Record<string, string>;
}

/** An image on an engine: its id and the references (repo:tag) it carries. */
export interface EngineImage {
  id: string;
  tags: string[];
}

export interface DockerEndpointConfig {
  /** unix:///var/run/docker.sock, tcp://host:2376 (TLS with the files below), ssh://user@host[:port]. */
  endpoint: string;
  tlsCaPath?: string | null;
  tlsCertPath?: string | null;
  tlsKeyPath?: string | null;
  /** Private key for ssh:// (default: the ssh agent at SSH_AUTH_SOCK). */
  sshKeyPath?: string | null;
  /** Server name used in error messages (default derived from the endpoint). */
  name?: string;
  /** Bound of one Docker API call (default 30 s). */
  requestTimeoutMs?: number;
}

/**
 * Bounding set kept after CapDrop ALL. Effective only for root processes in containers without no-new-privileges
 * (root execs then can chown/install); the image's own (non-root) user never gets effective capabilities.
 */
export const DEFAULT_CAP_ADD: readonly string[] = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'];
export const DEFAULT_PIDS_LIMIT = 2048;
export const DEFAULT_EXEC_MAX_OUTPUT_BYTES = 64 * 1024;
export const DEFAULT_EXEC_TIMEOUT_MS = 60_000;
const MAX_EXEC_OUTPUT_BYTES = 64 * 1024 * 1024;
const MAX_EXEC_TIMEOUT_MS = 24 * 3600_000;

const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
const PORT_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const CONTAINER_PORT = /^(\d{1,5})\/(tcp|udp|sctp)$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MIN_MEMORY_BYTES = 6 * 1024 * 1024; // Docker's minimum

// ---------------------------------------------------------------------------------------------------------------
// Endpoint parsing

export interface ParsedEndpoint {
  options: Docker.DockerOptions;
  /** Endpoint without credentials, for messages. */
  display: string;
}

function readEndpointFile(endpoint: string, what: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new InvalidDockerEndpointError(endpoint, `cannot read ${what} ${path}: ${(err as Error).message}`);
  }
}

export function parseDockerEndpoint(config: DockerEndpointConfig): ParsedEndpoint {
  const endpoint = (config.endpoint ?? '').trim();
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new InvalidDockerEndpointError(endpoint, 'expected unix:///path, tcp://host:port or ssh://user@host');
  }
  const protocol = url.protocol.replace(/:$/, '');
  if (protocol === 'unix') {
    const socketPath = decodeURIComponent(url.pathname);
    if (url.hostname || !socketPath.startsWith('/')) throw new InvalidDockerEndpointError(endpoint, 'unix endpoints need an absolute socket path (unix:///var/run/docker.sock)');
    return { options: { socketPath }, display: `unix://${socketPath}` };
  }
  if (protocol === 'tcp' || protocol === 'http' || protocol === 'https') {
    if (!url.hostname) throw new InvalidDockerEndpointError(endpoint, 'missing host');
    if (url.username || url.password) throw new InvalidDockerEndpointError(endpoint, 'credentials in tcp endpoints are not supported; use TLS client certificates');
    const hasCert = Boolean(config.tlsCertPath);
    const hasKey = Boolean(config.tlsKeyPath);
    if (hasCert !== hasKey) throw new InvalidDockerEndpointError(endpoint, 'TLS needs both a certificate and a key');
    const tls = protocol === 'https' || Boolean(config.tlsCaPath) || hasCert;
    const port = url.port ? Number(url.port) : tls ? 2376 : 2375;
    const options: Docker.DockerOptions = { host: url.hostname.replace(/^\[|\]$/g, ''), port, protocol: tls ? 'https' : 'http' };
    if (config.tlsCaPath) options.ca = readEndpointFile(endpoint, 'TLS CA', config.tlsCaPath);
    if (config.tlsCertPath) options.cert = readEndpointFile(endpoint, 'TLS certificate', config.tlsCertPath);
    if (config.tlsKeyPath) options.key = readEndpointFile(endpoint, 'TLS key', config.tlsKeyPath);
    return { options, display: `${tls ? 'https' : 'tcp'}://${url.hostname}:${port}` };
  }
  if (protocol === 'ssh') {
    if (!url.hostname) throw new InvalidDockerEndpointError(endpoint, 'missing host');
    if (url.password) throw new InvalidDockerEndpointError(endpoint, 'passwords in ssh endpoints are not supported; use an ssh agent or key file');
    const port = url.port ? Number(url.port) : 22;
    const username = decodeURIComponent(url.username) || 'root';
    const sshOptions: NonNullable<Docker.DockerOptions['sshOptions']> = {};
    if (config.sshKeyPath) sshOptions.privateKey = readEndpointFile(endpoint, 'ssh key', config.sshKeyPath);
    else if (process.env.SSH_AUTH_SOCK) sshOptions.agent = process.env.SSH_AUTH_SOCK;
    return {
      options: { protocol: 'ssh', host: url.hostname, port, username, sshOptions },
      display: `ssh://${username}@${url.hostname}${port === 22 ? '' : `:${port}`}`,
    };
  }
  throw new InvalidDockerEndpointError(endpoint, `unsupported scheme "${protocol}:" (use unix://, tcp:// or ssh://)`);
}

// ---------------------------------------------------------------------------------------------------------------
// Spec validation

function validateSpec(spec: WorkspaceContainerSpec): Record<string, { port: string }> {
  const fail = (msg: string): never => {
    throw new InvalidContainerSpecError(`Invalid container spec${spec?.name ? ` for ${spec.name}` : ''}: ${msg}`);
  };
  if (!spec || typeof spec !== 'object') fail('missing spec');
  if (typeof spec.name !== 'string' || !CONTAINER_NAME.test(spec.name)) fail(`container name ${JSON.stringify(spec.name)} is not valid`);
  if (typeof spec.image !== 'string' || !spec.image.trim() || /\s/.test(spec.image)) fail(`image ${JSON.stringify(spec.image)} is not valid`);
  if (typeof spec.cores !== 'number' || !Number.isFinite(spec.cores) || spec.cores <= 0 || spec.cores > 1024) fail(`cores must be a positive number, got ${String(spec.cores)}`);
  if (typeof spec.memoryBytes !== 'number' || !Number.isSafeInteger(spec.memoryBytes) || spec.memoryBytes < MIN_MEMORY_BYTES) {
    fail(`memoryBytes must be an integer >= ${MIN_MEMORY_BYTES}, got ${String(spec.memoryBytes)}`);
  }
  for (const [key, value] of Object.entries(spec.env ?? {})) {
    if (!ENV_NAME.test(key)) fail(`environment variable name ${JSON.stringify(key)} is not valid`);
    if (typeof value !== 'string' || value.includes('\0')) fail(`environment variable ${key} must be a string without NUL`);
  }
  for (const [key, value] of Object.entries(spec.labels ?? {})) {
    if (!key || typeof value !== 'string') fail(`label ${JSON.stringify(key)} must have a string value`);
  }
  const ports: Record<string, { port: string }> = {};
  for (const [name, value] of Object.entries(spec.ports ?? {})) {
    if (!PORT_NAME.test(name)) fail(`port name ${JSON.stringify(name)} is not valid`);
    const m = typeof value === 'string' ? CONTAINER_PORT.exec(value) : null;
    if (!m || Number(m[1]) < 1 || Number(m[1]) > 65535) fail(`port ${name} must look like "5900/tcp", got ${JSON.stringify(value)}`);
    ports[name] = { port: value };
  }
  if (spec.shmSizeBytes != null && (!Number.isSafeInteger(spec.shmSizeBytes) || spec.shmSizeBytes <= 0)) fail('shmSizeBytes must be a positive integer');
  if (spec.noNewPrivileges !== undefined && typeof spec.noNewPrivileges !== 'boolean') fail('noNewPrivileges must be a boolean');
  if (spec.pidsLimit != null && (!Number.isSafeInteger(spec.pidsLimit) || spec.pidsLimit < 16)) fail('pidsLimit must be an integer >= 16');
  for (const cap of spec.capAdd ?? []) if (!/^[A-Z_]+$/.test(cap) || cap === 'ALL' || cap === 'SYS_ADMIN') fail(`capability ${JSON.stringify(cap)} is not allowed`);
  for (const opt of spec.securityOpt ?? []) if (typeof opt !== 'string' || /^no-new-privileges/.test(opt)) fail(`security option ${JSON.stringify(opt)} is not allowed here`);
  if (spec.cpuAllocation !== undefined && spec.cpuAllocation !== 'Quotas' && spec.cpuAllocation !== 'Shares') fail('cpuAllocation must be Quotas or Shares');
  return ports;
}

function validateExecOptions(options: ExecOptions): void {
  if (!options || typeof options !== 'object') throw new InvalidExecOptionsError('exec options are required');
  // The user check comes first and is strict: only "root" or nothing.
  if (options.user !== undefined && options.user !== 'root') throw new ExecUserNotAllowedError(options.user);
  if (typeof options.cmd !== 'string' || !options.cmd.trim()) throw new InvalidExecOptionsError('exec cmd must be a non-empty string');
  if (options.cmd.includes('\0')) throw new InvalidExecOptionsError('exec cmd must not contain NUL');
  for (const [key, value] of Object.entries(options.environment ?? {})) {
    if (!ENV_NAME.test(key)) throw new InvalidExecOptionsError(`environment variable name ${JSON.stringify(key)} is not valid`);
    if (typeof value !== 'string' || value.includes('\0')) throw new InvalidExecOptionsError(`environment variable ${key} must be a string without NUL`);
  }
  if (options.workdir !== undefined && (typeof options.workdir !== 'string' || !options.workdir.startsWith('/') || options.workdir.includes('\0'))) {
    throw new InvalidExecOptionsError(`workdir must be an absolute path, got ${JSON.stringify(options.workdir)}`);
  }
  if (options.privileged !== undefined && typeof options.privileged !== 'boolean') throw new InvalidExecOptionsError('privileged must be a boolean');
  if (options.wait !== undefined && typeof options.wait !== 'boolean') throw new InvalidExecOptionsError('wait must be a boolean');
  const max = options.maxOutputBytes;
  if (max !== undefined && (!Number.isSafeInteger(max) || max < 0 || max > MAX_EXEC_OUTPUT_BYTES)) {
    throw new InvalidExecOptionsError(`maxOutputBytes must be an integer between 0 and ${MAX_EXEC_OUTPUT_BYTES}`);
  }
  const t = options.timeoutMs;
  if (t !== undefined && (typeof t !== 'number' || !Number.isFinite(t) || t <= 0 || t > MAX_EXEC_TIMEOUT_MS)) {
    throw new InvalidExecOptionsError(`timeoutMs must be a positive number of milliseconds (at most ${MAX_EXEC_TIMEOUT_MS})`);
  }
}

function parseDockerDate(value: string | undefined): Date | null {
  if (!value || value.startsWith('0001-01-01')) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

function parsePortsLabel(value: string | undefined): Record<string, string> | null {
  if (!value) return null;
  try {
    const parsed: unknown = JSON.parse(value);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(parsed as Record<string, unknown>)) if (typeof v === 'string') out[k] = v;
    return out;
  } catch {
    return null;
  }
}

/** dockerode accepts options (abortSignal) on ping/info; its typings do not say so. */
interface WithOptions {
  ping(options: { abortSignal: AbortSignal }): Promise<unknown>;
  info(options: { abortSignal: AbortSignal }): Promise<unknown>;
}

/** setTimeout's largest delay (about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const decodeStderr = (parts: Buffer[]) => Buffer.concat(parts).toString('utf8');

// ---------------------------------------------------------------------------------------------------------------

/** One Docker engine. All methods throw AgentErrors (see errors.ts); `isTransientDockerError` tells retry from fail. */
export class DockerHost {
  constructor(
    readonly docker: Docker,
    /** Server name used in messages. */
    readonly name: string,
    readonly requestTimeoutMs = 30_000,
  ) {}

  static fromEndpoint(config: DockerEndpointConfig): DockerHost {
    const { options, display } = parseDockerEndpoint(config);
    return new DockerHost(new Docker(options), config.name || display, config.requestTimeoutMs ?? 30_000);
  }

  /** Runs one Docker call bounded by timeoutMs (at most setTimeout's largest delay); errors come out classified. */
  private async call<T>(operation: string, ctx: Partial<ClassifyContext>, fn: (signal: AbortSignal) => Promise<T>, bound = this.requestTimeoutMs): Promise<T> {
    const timeoutMs = Math.min(bound, MAX_TIMER_MS);
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new DockerTimeoutError(this.name, operation, Math.round(timeoutMs)));
      }, timeoutMs);
    });
    try {
      return await Promise.race([fn(controller.signal), timeout]);
    } catch (err) {
      throw classifyDockerError(err, { host: this.name, operation, ...ctx });
    } finally {
      clearTimeout(timer);
    }
  }

  /** `timeoutMs` bounds this call alone (a health check's short bound); default the host's request bound. */
  async ping(timeoutMs = this.requestTimeoutMs): Promise<true> {
    await this.call('ping', {}, (abortSignal) => (this.docker as unknown as WithOptions).ping({ abortSignal }), timeoutMs);
    return true;
  }

  async info(): Promise<DockerInfo> {
    const info = (await this.call('get info', {}, (abortSignal) => (this.docker as unknown as WithOptions).info({ abortSignal }))) as {
      NCPU: number;
      MemTotal: number;
      ServerVersion: string;
      Name: string;
      OperatingSystem: string;
      Labels?: string[] | null;
    };
    const labels: Record<string, string> = {};
    for (const label of info.Labels ?? []) {
      const at = label.indexOf('=');
      if (at > 0) labels[label.slice(0, at)] = label.slice(at + 1);
    }
    return { ncpu: info.NCPU, memTotal: info.MemTotal, serverVersion: info.ServerVersion, name: info.Name, operatingSystem: info.OperatingSystem, labels };
  }

  /** Every tagged image on the engine (the inventory placement reads). */
  async listImages(): Promise<EngineImage[]> {
    const images = await this.call('list images', {}, (abortSignal) => this.docker.listImages({ abortSignal } as Docker.ListImagesOptions));
    return images.map((i) => ({ id: i.Id, tags: (i.RepoTags ?? []).filter((t) => t && t !== '<none>:<none>') }));
  }

  /**
   * `docker save` of one image as a tar stream (the caller pipes it into another engine's loadImage). The stream is
   * not bounded by the request timeout (an image can take minutes); the caller bounds the copy. `timeoutMs` bounds
   * the wait for the engine's answer, which for a large image on a busy host comes after tens of seconds (the engine
   * prepares the export first): the caller passes its copy's bound.
   */
  async saveImage(ref: string, timeoutMs = this.requestTimeoutMs): Promise<Readable> {
    return this.call(`save image ${ref}`, {}, () => this.docker.getImage(ref).get() as Promise<Readable>, timeoutMs);
  }

  /** `docker load` of a tar stream (from saveImage); resolves when the engine has read and loaded all of it. */
  async loadImage(tar: Readable, timeoutMs: number): Promise<void> {
    await this.call('load image', {}, async (abortSignal) => {
      const response = (await this.docker.loadImage(tar, { abortSignal } as object)) as Readable;
      // The engine answers a JSON message stream; an error while loading arrives as {"error": …} in it.
      const chunks: Buffer[] = [];
      for await (const chunk of response) chunks.push(chunk as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const failed = /"error(Detail)?"\s*:\s*("([^"\\]|\\.)*"|\{[^}]*\})/.exec(text);
      if (failed) throw new Error(`docker load failed: ${failed[0]}`);
    }, timeoutMs);
  }

  /** True when the image is present locally (nothing is ever pulled). */
  async imageExists(ref: string): Promise<boolean> {
    return this.call(`inspect image ${ref}`, {}, async (abortSignal) => {
      try {
        // Aborted at the call's bound like every other call, so no request outlives its timeout.
        await this.inspectImage(ref, abortSignal);
        return true;
      } catch (err) {
        if (httpStatusOf(err) === 404) return false;
        throw err;
      }
    });
  }

  /**
   * Creates (does not start) the workspace container. Idempotent by name: when a container with spec.name exists
   * (HTTP 409) its id is returned, provided it carries the same labels (else ContainerConflictError).
   * A missing image is ImageNotFoundError (permanent); nothing is pulled.
   */
  async createWorkspaceContainer(spec: WorkspaceContainerSpec): Promise<CreatedContainer> {
    const ports = validateSpec(spec);
    const publishHost = spec.publishHost || '127.0.0.1';
    const exposed: Record<string, object> = {};
    const bindings: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
    const joined = spec.networkContainer ? `container:${spec.networkContainer}` : null;
    for (const { port } of joined ? [] : Object.values(ports)) {
      exposed[port] = {};
      bindings[port] = [{ HostIp: publishHost, HostPort: '' }];
    }
    const portMap = Object.fromEntries(Object.entries(ports).map(([n, p]) => [n, p.port]));
    const body: Docker.ContainerCreateOptions = {
      name: spec.name,
      Image: spec.image,
      Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
      Labels: { ...spec.labels, [LABELS.ports]: JSON.stringify(portMap) },
      ExposedPorts: exposed,
      ...(spec.user ? { User: spec.user } : {}),
      ...(spec.cmd?.length ? { Cmd: spec.cmd } : {}),
      ...(spec.entrypoint?.length ? { Entrypoint: spec.entrypoint } : {}),
      ...(spec.hostname && !joined ? { Hostname: spec.hostname } : {}),
      ...(spec.healthcheck ? {
        Healthcheck: {
          Test: ['CMD', ...spec.healthcheck.cmd], Interval: spec.healthcheck.intervalMs * 1e6, Timeout: spec.healthcheck.timeoutMs * 1e6,
          Retries: spec.healthcheck.retries, StartPeriod: spec.healthcheck.startPeriodMs * 1e6,
        },
      } : {}),
      HostConfig: {
        ...(spec.cpuAllocation === 'Shares' ? { CpuShares: Math.max(2, Math.round(spec.cores * 1024)) } : { NanoCpus: Math.round(spec.cores * 1e9) }),
        Memory: spec.memoryBytes,
        MemorySwap: spec.memoryBytes,
        PortBindings: bindings,
        ...(spec.shmSizeBytes ? { ShmSize: spec.shmSizeBytes } : {}),
        ...(joined ? { NetworkMode: joined } : spec.network ? { NetworkMode: spec.network } : {}),
        CapDrop: ['ALL'],
        CapAdd: [...(spec.capAdd ?? DEFAULT_CAP_ADD)],
        SecurityOpt: [...(spec.noNewPrivileges === false ? [] : ['no-new-privileges:true']), ...(spec.securityOpt ?? [])],
        ...(spec.devices?.length ? { Devices: spec.devices.map((d) => ({ PathOnHost: d.pathOnHost, PathInContainer: d.pathInContainer, CgroupPermissions: d.cgroupPermissions })) } : {}),
        ...(spec.extraHosts?.length && !joined ? { ExtraHosts: spec.extraHosts } : {}),
        // Binds (not Mounts): Docker makes a missing host directory, as `docker run -v` does.
        ...(spec.mounts?.length ? { Binds: spec.mounts.map((m) => `${m.source}:${m.target}:${m.readOnly ? 'ro' : 'rw'}`) } : {}),
        PidsLimit: spec.pidsLimit ?? DEFAULT_PIDS_LIMIT,
        Init: spec.init ?? true,
        RestartPolicy: { Name: 'no' },
      },
    };
    const operation = `create container ${spec.name}`;
    // A name can be reserved (409) by a concurrent create that is not inspectable yet (404), or by a container
    // being removed: wait for either to settle, bounded.
    const settleDeadline = performance.now() + Math.min(this.requestTimeoutMs, 15_000);
    for (let delay = 25; ; delay = Math.min(delay * 2, 250)) {
      try {
        const container = await this.call(operation, { image: spec.image }, (abortSignal) => this.docker.createContainer({ ...body, abortSignal }));
        return { containerId: container.id, created: true };
      } catch (err) {
        const cause = err instanceof AgentError ? err.cause : err;
        if (!(httpStatusOf(cause) === 409 && /already in use|container name/i.test(daemonMessageOf(cause)))) throw err;
        const existing = await this.findByName(spec.name);
        if (!existing) {
          if (performance.now() + delay < settleDeadline) {
            await sleep(delay);
            continue;
          }
          throw new DockerDaemonError(this.name, operation, 409, `container name ${spec.name} stays reserved by a container that is being created or removed`, true, { cause });
        }
        const foreign = Object.entries(spec.labels ?? {}).find(([k, v]) => existing.labels[k] !== v);
        if (foreign) {
          throw new ContainerConflictError(
            this.name,
            `container name ${spec.name} is used by container ${existing.id.slice(0, 12)} whose label ${foreign[0]} is ${JSON.stringify(existing.labels[foreign[0]] ?? null)}, not ${JSON.stringify(foreign[1])}`,
          );
        }
        return { containerId: existing.id, created: false };
      }
    }
  }

  private async findByName(name: string): Promise<{ id: string; labels: Record<string, string> } | null> {
    return this.call(`inspect container ${name}`, {}, async (abortSignal) => {
      try {
        const info = await this.docker.getContainer(name).inspect({ abortSignal });
        return { id: info.Id, labels: info.Config?.Labels ?? {} };
      } catch (err) {
        if (httpStatusOf(err) === 404) return null;
        throw err;
      }
    });
  }

  /** Idempotent: a container that is already running (HTTP 304) is success. */
  async start(containerId: string): Promise<void> {
    await this.call(`start container ${containerId}`, { containerId }, async (abortSignal) => {
      try {
        await this.docker.getContainer(containerId).start({ abortSignal });
      } catch (err) {
        if (httpStatusOf(err) === 304) return;
        throw err;
      }
    });
  }

  /** Idempotent: already stopped (304) or gone (404) is success. */
  async stop(containerId: string, graceSeconds = 10): Promise<void> {
    await this.call(
      `stop container ${containerId}`,
      { containerId },
      async (abortSignal) => {
        try {
          await this.docker.getContainer(containerId).stop({ t: graceSeconds, abortSignal });
        } catch (err) {
          if (httpStatusOf(err) === 304 || httpStatusOf(err) === 404) return;
          throw err;
        }
      },
      this.requestTimeoutMs + graceSeconds * 1000,
    );
  }

  /**
   * State of a container. hostPorts are named by `ports` (name → "5900/tcp") or, when omitted, by the port map
   * label set at creation. Missing container: ContainerNotFoundError.
   */
  async inspect(containerId: string, ports?: Record<string, string>): Promise<ContainerState> {
    const info = await this.call(`inspect container ${containerId}`, { containerId }, (abortSignal) => this.docker.getContainer(containerId).inspect({ abortSignal }));
    const labels = info.Config?.Labels ?? {};
    const names = ports ?? parsePortsLabel(labels[LABELS.ports]) ?? {};
    const published = info.NetworkSettings?.Ports ?? {};
    const hostPorts: Record<string, number> = {};
    for (const [name, containerPort] of Object.entries(names)) {
      const list = (published[containerPort] ?? []) as Array<{ HostIp?: string; HostPort?: string }>;
      const binding = list.find((b) => b.HostIp === '127.0.0.1' && b.HostPort) ?? list.find((b) => b.HostPort);
      const port = binding ? Number(binding.HostPort) : NaN;
      if (Number.isInteger(port) && port > 0) hostPorts[name] = port;
    }
    const networks = Object.values(info.NetworkSettings?.Networks ?? {}) as Array<{ IPAddress?: string }>;
    const ip = info.NetworkSettings?.IPAddress || networks.find((n) => n.IPAddress)?.IPAddress || null;
    const state = info.State ?? ({} as Docker.ContainerInspectInfo['State']);
    return {
      id: info.Id,
      name: (info.Name ?? '').replace(/^\//, ''),
      image: info.Config?.Image ?? '',
      running: Boolean(state.Running),
      status: state.Status ?? 'unknown',
      ip,
      hostPorts,
      exitCode: typeof state.ExitCode === 'number' ? state.ExitCode : null,
      startedAt: parseDockerDate(state.StartedAt),
      finishedAt: parseDockerDate(state.FinishedAt),
      oomKilled: Boolean(state.OOMKilled),
      error: state.Error || null,
      labels,
      health: (state as { Health?: { Status?: string } }).Health?.Status || null,
    };
  }

  /** The image's own USER and environment (Config.User, Config.Env), for defaults such as the home directory. */
  async imageConfig(ref: string): Promise<{ user: string | null; env: Record<string, string> }> {
    const info = await this.call(`inspect image ${ref}`, { image: ref }, (abortSignal) => this.inspectImage(ref, abortSignal));
    const env: Record<string, string> = {};
    for (const entry of info.Config?.Env ?? []) {
      const at = entry.indexOf('=');
      if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1);
    }
    return { user: info.Config?.User || null, env };
  }

  /** Image.inspect with an abort signal (dockerode's typings omit the options). */
  private inspectImage(ref: string, abortSignal: AbortSignal): Promise<Docker.ImageInspectInfo> {
    return (this.docker.getImage(ref) as unknown as { inspect(options: { abortSignal: AbortSignal }): Promise<Docker.ImageInspectInfo> }).inspect({ abortSignal });
  }

  /**
   * Extracts the tar stream `tar` into the container (running or not) under the directory `path`, keeping the
   * ownership the tar's headers carry (no copyUIDGID). Bounded by `timeoutMs` as a whole: a large, throttled
   * archive needs a generous bound. An error of `tar` itself aborts the upload and is what this throws.
   */
  async putArchive(containerId: string, path: string, tar: Readable, timeoutMs: number): Promise<void> {
    let sourceError: unknown = null;
    tar.once('error', (err) => (sourceError = err));
    try {
      await this.call(`copy an archive into ${containerId}:${path}`, {}, (abortSignal) =>
        this.docker.getContainer(containerId).putArchive(tar, { path, abortSignal }), timeoutMs);
    } catch (err) {
      if (sourceError) throw sourceError;
      throw this.archiveError(err, containerId, path);
    }
  }

  /**
   * A tar stream of `path` in the container (running or stopped): entries are named from the path's last segment
   * ("workspace/…" for /home/workspace). The caller must consume or destroy it.
   */
  async getArchive(containerId: string, path: string): Promise<Readable> {
    try {
      return (await this.call(`copy ${containerId}:${path} out`, {}, (abortSignal) => this.docker.getContainer(containerId).getArchive({ path, abortSignal }))) as Readable;
    } catch (err) {
      throw this.archiveError(err, containerId, path);
    }
  }

  /** A 404 of the archive calls: the container (ContainerNotFoundError) or the path in it (ContainerPathNotFoundError). */
  private archiveError(err: unknown, containerId: string, path: string): unknown {
    const cause = err instanceof AgentError ? err.cause : err;
    if (httpStatusOf(cause) !== 404) return err;
    // dockerode prefixes its own reason for any 404 ("no such container - …"): the daemon's text tells the two apart.
    return /could not find the file/i.test(daemonMessageOf(cause)) ? new ContainerPathNotFoundError(containerId, path, this.name, { cause }) : new ContainerNotFoundError(containerId, this.name, { cause });
  }

  /** Force-removes the container and its anonymous volumes. Gone already (404) or removal in progress is success. */
  async remove(containerId: string): Promise<void> {
    await this.call(`remove container ${containerId}`, { containerId }, async (abortSignal) => {
      try {
        await this.docker.getContainer(containerId).remove({ force: true, v: true, abortSignal });
      } catch (err) {
        const status = httpStatusOf(err);
        if (status === 404) return;
        if (status === 409 && /already in progress/i.test(daemonMessageOf(err))) return;
        throw err;
      }
    });
  }

  /** Containers (running or not) carrying all the given labels. At least one label is required. */
  async listByLabels(labels: Record<string, string>): Promise<ContainerSummary[]> {
    const filters = Object.entries(labels ?? {}).map(([k, v]) => `${k}=${v}`);
    if (filters.length === 0) throw new InvalidContainerSpecError('listByLabels needs at least one label');
    const list = await this.call('list containers', {}, (abortSignal) => this.docker.listContainers({ all: true, filters: { label: filters }, abortSignal }));
    return list.map((c) => ({
      id: c.Id,
      name: (c.Names?.[0] ?? '').replace(/^\//, ''),
      image: c.Image,
      labels: c.Labels ?? {},
      state: c.State,
      status: c.Status,
      createdAt: new Date(c.Created * 1000),
    }));
  }

  /** See waitForRfb in rfb.ts. */
  waitForRfb(host: string, port: number, options: WaitForRfbOptions = {}): Promise<number> {
    return waitForRfb(host, port, options);
  }

  /**
   * Runs `/bin/sh -c cmd` in a running container. Without `user` it runs as the container's configured (sandboxed)
   * user; `user: 'root'` runs as root; any other value throws ExecUserNotAllowedError before Docker is called.
   * wait (default true): collects stdout/stderr (each capped at maxOutputBytes) and the exit code, bounded by
   * timeoutMs (ExecTimeoutError with the partial output). wait false: starts detached and returns the exec id.
   */
  exec(containerId: string, options: ExecOptions & { wait: false }): Promise<DetachedExec>;
  exec(containerId: string, options: ExecOptions & { wait?: true }): Promise<ExecResult>;
  exec(containerId: string, options: ExecOptions): Promise<ExecResult | DetachedExec>;
  async exec(containerId: string, options: ExecOptions): Promise<ExecResult | DetachedExec> {
    validateExecOptions(options);
    const wait = options.wait ?? true;
    const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
    const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_EXEC_MAX_OUTPUT_BYTES;
    const started = performance.now();
    const deadline = started + timeoutMs;
    const left = () => Math.max(1, deadline - performance.now());
    const ctx = { containerId };

    const createOptions: Docker.ExecCreateOptions = {
      Cmd: ['/bin/sh', '-c', options.cmd],
      AttachStdin: false,
      AttachStdout: wait,
      AttachStderr: wait,
      Tty: false,
      Env: Object.entries(options.environment ?? {}).map(([k, v]) => `${k}=${v}`),
      ...(options.workdir ? { WorkingDir: options.workdir } : {}),
      ...(options.privileged ? { Privileged: true } : {}),
      ...(options.user === 'root' ? { User: 'root' } : {}),
    };
    const exec = await this.call(
      `create exec in ${containerId}`,
      ctx,
      (abortSignal) => this.docker.getContainer(containerId).exec({ ...createOptions, abortSignal }),
      Math.min(this.requestTimeoutMs, left()),
    );

    if (!wait) {
      await this.call(
        `start exec in ${containerId}`,
        ctx,
        async (abortSignal) => {
          const res = (await exec.start({ Detach: true, Tty: false, abortSignal })) as Readable | undefined;
          res?.resume?.();
        },
        Math.min(this.requestTimeoutMs, left()),
      );
      return { execId: exec.id };
    }

    const collector = new DockerOutputCollector(maxOutputBytes);
    const partial = () => ({ stdout: collector.stdout, stderr: collector.stderr, truncated: collector.stdoutTruncated || collector.stderrTruncated });
    const stream = (await this.call(
      `start exec in ${containerId}`,
      ctx,
      (abortSignal) => exec.start({ hijack: true, stdin: false, Detach: false, Tty: false, abortSignal }),
      Math.min(this.requestTimeoutMs, left()),
    )) as Duplex;

    const finished = await new Promise<boolean>((resolve, reject) => {
      let done = false;
      const settle = (ok: boolean, err?: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) reject(classifyDockerError(err, { host: this.name, operation: `read exec output in ${containerId}`, containerId }));
        else resolve(ok);
      };
      const timer = setTimeout(() => {
        settle(false);
        stream.destroy();
      }, left());
      stream.on('data', (chunk: Buffer) => collector.push(chunk));
      stream.on('end', () => settle(true));
      stream.on('close', () => settle(true));
      stream.on('error', (err) => settle(false, err));
    });
    if (!finished) throw new ExecTimeoutError(exec.id, timeoutMs, partial());

    // The stream ends when the process exits; the exit code may lag by a few ms.
    const exitCode = await this.exitCodeOf(exec, containerId, deadline, () => new ExecTimeoutError(exec.id, timeoutMs, partial()));
    stream.destroy();
    return {
      execId: exec.id,
      exitCode,
      stdout: collector.stdout,
      stderr: collector.stderr,
      truncated: collector.stdoutTruncated || collector.stderrTruncated,
      stdoutTruncated: collector.stdoutTruncated,
      stderrTruncated: collector.stderrTruncated,
      stdoutBytes: collector.stdoutBytes,
      stderrBytes: collector.stderrBytes,
      durationMs: Math.round(performance.now() - started),
    };
  }

  /**
   * Runs `/bin/sh -c cmd` in a running container as its configured (sandboxed) user, never root, with stdout
   * streamed as it comes and, with `stdin: true`, stdin fed by the caller: file bytes pass through a process bound
   * by that user's permissions. Creating and starting are bounded like any call; the run itself by `wait`.
   */
  async execStream(containerId: string, options: StreamExecOptions): Promise<StreamingExec> {
    validateExecOptions({ cmd: options.cmd, environment: options.environment });
    const ctx = { containerId };
    const exec = await this.call(`create exec in ${containerId}`, ctx, (abortSignal) =>
      this.docker.getContainer(containerId).exec({
        Cmd: ['/bin/sh', '-c', options.cmd],
        AttachStdin: options.stdin === true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        Env: Object.entries(options.environment ?? {}).map(([k, v]) => `${k}=${v}`),
        abortSignal,
      }),
    );
    const socket = (await this.call(`start exec in ${containerId}`, ctx, (abortSignal) => exec.start({ hijack: true, stdin: false, Detach: false, Tty: false, abortSignal }))) as Duplex;

    const stdout = new PassThrough();
    const maxStderr = options.maxStderrBytes ?? DEFAULT_EXEC_MAX_OUTPUT_BYTES;
    const stderr: Buffer[] = [];
    let stderrKept = 0;
    let failure: unknown = null;
    const frames = new DockerFrameReader((stream, data) => {
      if (stream === 1) {
        // Backpressure: a slow reader pauses the connection, and so, through Docker's pipes, the process.
        if (!stdout.destroyed && !stdout.write(data)) socket.pause();
      } else if (stream === 2 && stderrKept < maxStderr) {
        const part = data.subarray(0, maxStderr - stderrKept);
        stderr.push(Buffer.from(part));
        stderrKept += part.length;
      }
    });
    stdout.on('drain', () => socket.resume());
    // A reader that gives up (destroys stdout) drops the connection.
    stdout.once('close', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => frames.push(chunk));
    socket.on('error', (err) => (failure ??= err));
    const closed = new Promise<void>((resolve) => {
      let settled = false;
      const settle = () => {
        if (settled) return;
        settled = true;
        if (failure) stdout.destroy(classifyDockerError(failure, { host: this.name, operation: `read exec output in ${containerId}`, containerId }));
        else stdout.end();
        resolve();
      };
      // Docker half-closes when the process has exited and its output is sent. Stdin the process never read may
      // still be queued on our side (it stopped reading): waiting for a full close would wait forever, so drop it.
      socket.once('end', () => {
        settle();
        socket.destroy();
      });
      socket.once('close', settle);
    });
    const stderrText = () => decodeStderr(stderr);

    return {
      execId: exec.id,
      stdin: socket,
      stdout,
      close: () => socket.destroy(),
      wait: async (timeoutMs: number) => {
        const deadline = performance.now() + timeoutMs;
        const timedOut = () => {
          socket.destroy();
          return new ExecTimeoutError(exec.id, timeoutMs, { stdout: '', stderr: stderrText(), truncated: false });
        };
        let timer: NodeJS.Timeout | undefined;
        const inTime = await Promise.race([closed.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
        clearTimeout(timer);
        if (!inTime) throw timedOut();
        return { exitCode: await this.exitCodeOf(exec, containerId, deadline, timedOut), stderr: stderrText() };
      },
    };
  }

  /** The exit code of an exec whose output ended: Docker may report it a few ms later; polled until `deadline`. */
  private async exitCodeOf(exec: Docker.Exec, containerId: string, deadline: number, timedOut: () => Error): Promise<number> {
    for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
      const info = await this.call(`inspect exec in ${containerId}`, { containerId }, (abortSignal) => exec.inspect({ abortSignal }), Math.min(this.requestTimeoutMs, Math.max(1, deadline - performance.now())));
      if (!info.Running && typeof info.ExitCode === 'number') return info.ExitCode;
      if (deadline - performance.now() <= delay) throw timedOut();
      await sleep(delay);
    }
  }

}
