import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { dirname } from 'node:path';
import type { LoggerOptions } from 'pino';

/** Fields whose values never reach a log line, wherever they appear (top level or nested two deep). */
export const SECRET_FIELDS = [
  'api_key_secret', 'password', 'new_password', 'session_jwt', 'jwt', 'token', 'session_token', 'view_only_token', 'access_token', 'refresh_token',
  'secret', 'client_secret', 'private_key', 'credentials', 'credential', 'authorization', 'cookie', 'set-cookie', 'recaptcha_private_key',
];

/** Paths pino redacts: each secret field at the top, one and two levels down, and the request/response headers. */
export const REDACT_PATHS = [
  ...SECRET_FIELDS.flatMap((field) => [`["${field}"]`, `*["${field}"]`, `*.*["${field}"]`]),
  'req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]',
];

/** LOG_LEVEL (Nest's names) → pino's. */
const LEVELS: Record<string, string> = { error: 'error', warn: 'warn', log: 'info', debug: 'debug', verbose: 'trace' };

/** An incoming X-Request-Id is kept when it is a sane token; anything else gets a fresh one. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface LogSettings {
  LOG_LEVEL: string;
  LOG_FORMAT?: string;
  LOG_FILE?: string;
}

/** `pretty` (pino-pretty, for a human at a terminal) or `json`; unset: pretty on a terminal, JSON otherwise; always JSON into LOG_FILE. */
export function logFormat(settings: LogSettings, isTTY = Boolean(process.stdout.isTTY)): 'json' | 'pretty' {
  if (settings.LOG_FILE) return 'json';
  if (settings.LOG_FORMAT === 'json' || settings.LOG_FORMAT === 'pretty') return settings.LOG_FORMAT;
  return isTTY ? 'pretty' : 'json';
}

/** The request id of a request: its X-Request-Id when sane, else a new one (the api echoes it in X-Request-Id). */
export function requestIdOf(req: Pick<IncomingMessage, 'headers'>): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID().replace(/-/g, '');
}

/**
 * The pino options of a process: one JSON line per event with level (as a name), time (ISO), msg. Lines written
 * while a request or a job is handled get its fields (request_id, operation, …) from the log context
 * (log-context.ts) through `mixin`, so nothing is made per request unless a line is written. Secrets are
 * redacted by REDACT_PATHS, not by call sites.
 */
export function loggerOptions(settings: LogSettings, role: string, mixin?: () => Record<string, unknown>): LoggerOptions {
  const pretty = logFormat(settings) === 'pretty';
  return {
    level: LEVELS[settings.LOG_LEVEL] ?? 'info',
    base: { service: `workspace-server-${role}`, pid: process.pid },
    messageKey: 'msg',
    timestamp: () => `,"time":"${new Date().toISOString()}"`,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    ...(mixin ? { mixin, mixinMergeStrategy: (line: object, fields: object) => ({ ...fields, ...line }) } : {}),
    ...(pretty ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard', messageKey: 'msg' } } } : {}),
  };
}

/** One descriptor per LOG_FILE path and process (several apps of one process, as in the e2e tests, share it). */
const logFiles = new Map<string, number>();

/**
 * Where the lines go when LOG_FILE is set: appended to that file (created with its directory), written
 * synchronously so that a process that exits loses none.
 */
export function logFileStream(path: string): { write(line: string): void } {
  let fd = logFiles.get(path);
  if (fd === undefined) {
    mkdirSync(dirname(path), { recursive: true });
    fd = openSync(path, 'a');
    logFiles.set(path, fd);
  }
  const target = fd;
  return { write: (line: string) => void writeSync(target, line) };
}

/** Closes every LOG_FILE descriptor (tests). */
export function closeLogFiles(): void {
  for (const fd of logFiles.values()) closeSync(fd);
  logFiles.clear();
}
