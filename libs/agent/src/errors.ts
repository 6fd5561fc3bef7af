import { ErrorCode } from '@ws/common';

/**
 * Everything the agent throws is an AgentError. `transient` tells the worker whether retrying the job can
 * help (daemon unreachable, 5xx, timeouts) or not (missing image, invalid config, rejected exec user); the
 * worker turns permanent ones into BullMQ UnrecoverableError. `apiCode` is the public error code to report.
 */
export abstract class AgentError extends Error {
  abstract readonly transient: boolean;
  abstract readonly code: string;
  abstract readonly apiCode: ErrorCode;

  protected constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The daemon could not be reached or the connection broke (ECONNREFUSED, ECONNRESET, socket hang up …). */
export class DockerUnavailableError extends AgentError {
  readonly transient = true;
  readonly code = 'docker_unavailable';
  readonly apiCode = ErrorCode.Unavailable;
  constructor(readonly host: string, reason: string, options?: { cause?: unknown }) {
    super(`Docker on server ${host} is unreachable: ${reason}`, options);
  }
}

/** A path that does not exist inside a container (copying an archive in or out). */
export class ContainerPathNotFoundError extends AgentError {
  readonly transient = false;
  readonly code = 'container_path_not_found';
  readonly apiCode = ErrorCode.InvalidState;
  constructor(readonly containerId: string, readonly path: string, readonly host: string, options?: { cause?: unknown }) {
    super(`${path} does not exist in container ${containerId} on server ${host}`, options);
  }
}

/** A Docker API call did not answer in time. */
export class DockerTimeoutError extends AgentError {
  readonly transient = true;
  readonly code = 'docker_timeout';
  readonly apiCode = ErrorCode.Unavailable;
  constructor(readonly host: string, readonly operation: string, readonly timeoutMs: number) {
    super(`Docker on server ${host} did not answer "${operation}" within ${timeoutMs} ms`);
  }
}

/** Any other daemon answer that is not success; transient for 5xx except known permanent causes. */
export class DockerDaemonError extends AgentError {
  readonly code = 'docker_error';
  readonly apiCode: ErrorCode;
  constructor(
    readonly host: string,
    readonly operation: string,
    readonly statusCode: number | null,
    readonly daemonMessage: string,
    readonly transient: boolean,
    options?: { cause?: unknown },
  ) {
    super(`Docker on server ${host} failed to ${operation}${statusCode ? ` (HTTP ${statusCode})` : ''}: ${daemonMessage}`, options);
    this.apiCode = transient ? ErrorCode.Unavailable : ErrorCode.Internal;
  }
}

export class ImageNotFoundError extends AgentError {
  readonly transient = false;
  readonly code = 'image_not_found';
  readonly apiCode = ErrorCode.InvalidState;
  constructor(readonly image: string, readonly host: string, options?: { cause?: unknown }) {
    super(`Image ${image} is not present on server ${host}`, options);
  }
}

/** HTTP 400 from the daemon: the container/exec configuration is invalid. */
export class InvalidContainerConfigError extends AgentError {
  readonly transient = false;
  readonly code = 'invalid_container_config';
  readonly apiCode = ErrorCode.InvalidRequest;
  constructor(readonly host: string, readonly operation: string, daemonMessage: string, options?: { cause?: unknown }) {
    super(`Docker on server ${host} rejected the configuration to ${operation}: ${daemonMessage}`, options);
  }
}

/** A spec that fails local validation before anything is sent to Docker. */
export class InvalidContainerSpecError extends AgentError {
  readonly transient = false;
  readonly code = 'invalid_container_spec';
  readonly apiCode = ErrorCode.InvalidRequest;
  constructor(message: string) {
    super(message);
  }
}

/** HTTP 409 other than "name already in use" (or a name taken by a container of another workspace). */
export class ContainerConflictError extends AgentError {
  readonly transient = false;
  readonly code = 'container_conflict';
  readonly apiCode = ErrorCode.Conflict;
  constructor(readonly host: string, message: string, options?: { cause?: unknown }) {
    super(`Conflict on server ${host}: ${message}`, options);
  }
}

export class ContainerNotFoundError extends AgentError {
  readonly transient = false;
  readonly code = 'container_not_found';
  readonly apiCode = ErrorCode.InvalidState;
  constructor(readonly containerId: string, readonly host: string, options?: { cause?: unknown }) {
    super(`Container ${containerId} does not exist on server ${host}`, options);
  }
}

export class ContainerNotRunningError extends AgentError {
  readonly transient = false;
  readonly code = 'container_not_running';
  readonly apiCode = ErrorCode.InvalidState;
  constructor(readonly containerId: string, readonly host: string, options?: { cause?: unknown }) {
    super(`Container ${containerId} on server ${host} is not running`, options);
  }
}

/** The endpoint string or its TLS files are unusable. */
export class InvalidDockerEndpointError extends AgentError {
  readonly transient = false;
  readonly code = 'invalid_docker_endpoint';
  readonly apiCode = ErrorCode.InvalidRequest;
  constructor(readonly endpoint: string, reason: string) {
    super(`Invalid Docker endpoint "${endpoint}": ${reason}`);
  }
}

/** exec options rejected before calling Docker (user other than root/default, bad env name …). */
export class InvalidExecOptionsError extends AgentError {
  readonly transient = false;
  readonly code = 'invalid_exec_options';
  readonly apiCode = ErrorCode.InvalidRequest;
  constructor(message: string) {
    super(message);
  }
}

export class ExecUserNotAllowedError extends InvalidExecOptionsError {
  constructor(readonly user: unknown) {
    super(`Exec user ${JSON.stringify(user)} is not allowed: use "root" or omit the user to run as the image's user`);
  }
}

export interface PartialExecOutput {
  stdout: string;
  stderr: string;
  truncated: boolean;
}

/**
 * The command did not finish within timeoutMs. Permanent: re-running a command is not idempotent. The process
 * may still be running inside the container (the Docker API cannot kill an exec).
 */
export class ExecTimeoutError extends AgentError {
  readonly transient = false;
  readonly code = 'exec_timeout';
  readonly apiCode = ErrorCode.Unavailable;
  constructor(
    readonly execId: string,
    readonly timeoutMs: number,
    readonly partial: PartialExecOutput,
  ) {
    super(`Command did not finish within ${timeoutMs} ms (exec ${execId.slice(0, 12)} may still be running)`);
  }
}

/** No RFB banner arrived on host:port in time: the desktop did not come up. */
export class RfbTimeoutError extends AgentError {
  readonly transient = true;
  readonly code = 'rfb_timeout';
  readonly apiCode = ErrorCode.Unavailable;
  constructor(
    readonly host: string,
    readonly port: number,
    readonly timeoutMs: number,
    readonly attempts: number,
    readonly lastError: string,
  ) {
    super(`No VNC (RFB) banner on ${host}:${port} within ${timeoutMs} ms after ${attempts} attempts (last: ${lastError})`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Classification of raw errors from dockerode / docker-modem / net / ssh2.

const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EAI_AGAIN',
  'ECONNABORTED',
  'ESOCKETTIMEDOUT',
  'UND_ERR_SOCKET',
]);
const TRANSIENT_STATUS = new Set([500, 502, 503, 504]);
/** Daemon 5xx messages whose cause does not go away by retrying. */
const PERMANENT_5XX = [
  /no such image/i,
  /invalid reference format/i,
  /pull access denied/i,
  /manifest unknown/i,
  /executable file not found/i,
  /exec format error/i,
  /no such file or directory/i,
  /invalid (argument|mount|option|volume|port|cpu|memory)/i,
  /minimum memory limit/i,
  /unknown (capability|runtime|option|security option)/i,
  /range of cpus/i,
  /nanocpus/i,
  /is not running/i,
  /is paused/i,
];

interface RawDockerError {
  code?: unknown;
  statusCode?: unknown;
  message?: unknown;
  json?: unknown;
  level?: unknown;
  name?: unknown;
}

function raw(err: unknown): RawDockerError {
  return err !== null && typeof err === 'object' ? (err as RawDockerError) : {};
}

export function httpStatusOf(err: unknown): number | null {
  const s = raw(err).statusCode;
  return typeof s === 'number' ? s : null;
}

/** The daemon's own message ({"message": "..."}) when there is one, else the error message. */
export function daemonMessageOf(err: unknown): string {
  const r = raw(err);
  const json = r.json;
  if (json && typeof json === 'object' && typeof (json as { message?: unknown }).message === 'string') {
    return (json as { message: string }).message.trim();
  }
  if (typeof json === 'string' && json.trim()) return json.trim();
  if (Buffer.isBuffer(json) && json.length) return json.toString('utf8').trim();
  if (typeof r.message === 'string') return r.message.replace(/^\(HTTP code \d+\)\s*/, '').trim();
  return String(err);
}

function isConnectionError(err: unknown): boolean {
  const r = raw(err);
  const code = typeof r.code === 'string' ? r.code : '';
  const message = typeof r.message === 'string' ? r.message : '';
  if (TRANSIENT_CODES.has(code)) return true;
  // unix socket missing while the daemon restarts
  if (code === 'ENOENT' && /\bconnect\b/.test(message)) return true;
  if (/socket hang up|connection (reset|refused|closed)|timed? ?out/i.test(message) && httpStatusOf(err) === null) return true;
  // ssh2 transport failures (authentication failures are permanent)
  if (r.level === 'client-socket' || r.level === 'client-timeout') return true;
  return false;
}

/**
 * True when retrying may succeed: connection failures (ECONNREFUSED, ECONNRESET, ETIMEDOUT, EPIPE, socket hang up
 * …) and daemon 500/502/503/504 except known permanent causes. AgentErrors answer with their own `transient`.
 * Anything else (404, 400, 409, programming errors) is permanent.
 */
export function isTransientDockerError(err: unknown): boolean {
  if (err instanceof AgentError) return err.transient;
  const status = httpStatusOf(err);
  if (status !== null) {
    if (!TRANSIENT_STATUS.has(status)) return false;
    const message = daemonMessageOf(err);
    return !PERMANENT_5XX.some((re) => re.test(message));
  }
  return isConnectionError(err);
}

export interface ClassifyContext {
  /** Server name for messages. */
  host: string;
  /** What was being done, e.g. "create container ws-1". */
  operation: string;
  image?: string;
  containerId?: string;
}

/** Wraps a raw dockerode error into the matching AgentError (AgentErrors pass through unchanged). */
export function classifyDockerError(err: unknown, ctx: ClassifyContext): AgentError {
  if (err instanceof AgentError) return err;
  const status = httpStatusOf(err);
  const message = daemonMessageOf(err);
  if (status === null) {
    if (isConnectionError(err)) return new DockerUnavailableError(ctx.host, message, { cause: err });
    return new DockerDaemonError(ctx.host, ctx.operation, null, message, false, { cause: err });
  }
  if (ctx.image && (/no such image/i.test(message) || (status === 404 && /image/i.test(message)))) {
    return new ImageNotFoundError(ctx.image, ctx.host, { cause: err });
  }
  if (status === 404 && ctx.containerId) return new ContainerNotFoundError(ctx.containerId, ctx.host, { cause: err });
  if (status === 400) return new InvalidContainerConfigError(ctx.host, ctx.operation, message, { cause: err });
  if (status === 409) {
    if (ctx.containerId && /is not running|is paused|is restarting/i.test(message)) {
      return new ContainerNotRunningError(ctx.containerId, ctx.host, { cause: err });
    }
    return new ContainerConflictError(ctx.host, message, { cause: err });
  }
  return new DockerDaemonError(ctx.host, ctx.operation, status, message, isTransientDockerError(err), { cause: err });
}
