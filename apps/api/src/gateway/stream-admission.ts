import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ApiError, AppConfig, dependencyOutage, ErrorCode, httpStatusFor, RETRY_AFTER_SECONDS } from '@ws/common';
import { AuthRateLimiter } from '@ws/auth';
import { PgNotifications } from '@ws/database';
import { ClientSettings, DEFAULT_CLIENT_SETTINGS } from '@ws/groups';
import { StreamStanding, withOverride, Workspace, WorkspaceAccess, WorkspaceGrant, WorkspacesService } from '@ws/workspaces';
import { originAllowed } from '../client/browser-request-guard';
import { STREAM_COOKIE } from '../client/client-connect.controller';

export interface StreamAdmitted extends WorkspaceGrant {
  /** The workspace's effective client settings, read at admission (a change applies from the next connection). */
  settings: ClientSettings;
}

/** An open connection as the admission watches it: closed when what it rests on goes away. */
interface Watched {
  standing: StreamStanding;
  close(reason: string): void;
}

/**
 * The one admission path of every websocket under /api/stream (VNC, sound, microphone): the origin check, the
 * address's rate limit, the stream cookie and WorkspaceAccess; the refusal written on the upgrade's socket; and
 * closing admitted connections whose session token is revoked or whose user (or workspace owner) is locked or
 * disabled (PostgreSQL notices).
 */
@Injectable()
export class StreamAdmission implements OnApplicationBootstrap {
  private readonly watched = new Set<Watched>();

  constructor(
    private readonly access: WorkspaceAccess,
    private readonly workspaces: WorkspacesService,
    private readonly notifications: PgNotifications,
    private readonly config: AppConfig,
    private readonly limiter: AuthRateLimiter,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.notifications.subscribe('session_token_changed', (id) => void this.recheck((s) => s.sessionTokenId === id));
    await this.notifications.subscribe('user_access_changed', (id) => void this.recheck((s) => s.userId === id || s.ownerId === id));
    this.notifications.onReset(() => void this.recheck(() => true));
  }

  /**
   * Admits the upgrade to the workspace's stream or throws. Refusals count against the address (a 401 past the
   * limit becomes 429); any other failure here is the database's or Redis's.
   */
  async admit(request: IncomingMessage, workspaceId: string): Promise<StreamAdmitted> {
    const attempt = { address: this.limiter.proxies.clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for']) };
    try {
      // A browser's websocket must come from a page of this service (the stream cookie may be SameSite=None).
      if (!originAllowed(request.headers.origin, request.headers.host, new URL(this.config.PUBLIC_BASE_URL).origin)) {
        throw new ApiError(ErrorCode.Forbidden, 'Streams may only be opened from pages of this service');
      }
      // An address with too many refused sessions gets 429 before any query; each refusal is counted.
      await this.limiter.assertNotBlocked(attempt);
      // Only the cookie: a token in the url would land in proxy and access logs.
      const jwt = cookie(request.headers.cookie, STREAM_COOKIE);
      if (!jwt) throw new ApiError(ErrorCode.Unauthenticated, 'No session: open the workspace link first');
      const grant = await this.access.authorizeStream(jwt, workspaceId);
      return { ...grant, settings: await this.clientSettings(grant.workspace) };
    } catch (err) {
      throw await this.limiter.failed(err, attempt);
    }
  }

  /** Closes the connection (once) when its standing is rechecked and found gone; the returned function stops watching. */
  watch(standing: StreamStanding, close: (reason: string) => void): () => void {
    const watched: Watched = { standing, close };
    this.watched.add(watched);
    return () => this.watched.delete(watched);
  }

  /** The workspace's effective client settings: its owner's groups', overlaid with a cast link's enforced ones. */
  private async clientSettings(workspace: Workspace): Promise<ClientSettings> {
    const groups = workspace.userId ? (await this.workspaces.settingsFor(workspace.userId)).clientSettings : DEFAULT_CLIENT_SETTINGS;
    return withOverride(groups, workspace);
  }

  /** Closes connections whose session token is gone or expired, or whose user or workspace owner is locked or disabled. */
  private async recheck(which: (s: StreamStanding) => boolean): Promise<void> {
    for (const watched of [...this.watched].filter((w) => which(w.standing))) {
      const reason = await this.access.endReason(watched.standing).catch(() => null);
      if (reason) watched.close(reason);
    }
  }
}

/**
 * Answers a failed upgrade on its raw socket: an ApiError with its status, a database or Redis outage with 503
 * while `dependencyMayFail` (before the desktop is being reached), anything else as the desktop's 502.
 */
export function refuseUpgrade(socket: Socket, err: unknown, options: { dependencyMayFail: boolean; desktopPart: string; logger: Logger; logLabel: string }): void {
  if (err instanceof ApiError) return writeRefusal(socket, httpStatusFor(err.code), err.message, err.retryAfterSeconds);
  const dependency = options.dependencyMayFail ? dependencyOutage(err) : null;
  if (dependency) return writeRefusal(socket, 503, `${dependency} is unavailable; retry later`);
  options.logger.warn(`${options.logLabel}: ${(err as Error).message}`);
  return writeRefusal(socket, 502, `The workspace's ${options.desktopPart} did not answer: ${(err as Error).message}`);
}

export function writeRefusal(socket: Socket, status: number, message: string, retryAfterSeconds = status === 503 ? RETRY_AFTER_SECONDS : undefined): void {
  const body = JSON.stringify({ error_message: message });
  const retryAfter = retryAfterSeconds !== undefined ? `Retry-After: ${retryAfterSeconds}\r\n` : '';
  const text = status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : status === 409 ? 'Conflict' : 'Error';
  socket.end(`HTTP/1.1 ${status} ${text}\r\n${retryAfter}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

function cookie(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return null;
}
