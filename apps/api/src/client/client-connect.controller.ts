import { Body, Controller, HttpCode, Post, Res, UseInterceptors } from '@nestjs/common';
import { IsBoolean, IsOptional, IsString, Length } from 'class-validator';
import type { FastifyReply } from 'fastify';
import { LimitFailedAuth, PublicRoute } from '@ws/auth';
import { ApiError, AppConfig, ErrorCode, toWireId } from '@ws/common';
import { SettingsService } from '@ws/settings';
import { operationalStatus, streamPath, withOverride, WorkspaceAccess, WorkspacesService, WorkspaceStartNotices } from '@ws/workspaces';
import type { StartWatch } from '@ws/workspaces';
import { DesktopConnections } from '../gateway/desktop-connections';

class ConnectRequest {
  @IsString() @Length(1, 8192) session_jwt!: string;
  @IsOptional() @IsString() @Length(1, 64) workspace_id?: string;
  @IsOptional() @IsString() @Length(1, 64) share_id?: string;
  /** While the workspace is starting, answer at its next change (or after START_WAIT_MS) instead of at once. */
  @IsOptional() @IsBoolean() wait_while_starting?: boolean;
}

/** The longest a `wait_while_starting` call is held: well under the idle timeouts of common proxies. */
export const START_WAIT_MS = 20_000;

export const STREAM_COOKIE = 'ws_stream';

/** Cookie attributes by the global setting Same Site Cookie Policy (None needs Secure, or browsers drop it). */
export function streamCookie(jwt: string, policy: string, secure: boolean): string {
  const attributes = [`${STREAM_COOKIE}=${jwt}`, 'Path=/api/stream', 'HttpOnly', `SameSite=${policy}`, 'Max-Age=86400'];
  if (secure || policy === 'None') attributes.push('Secure');
  return attributes.join('; ');
}

/**
 * The browser client's first call for a workspace or join link: who the link is for, the workspace's state,
 * and (with a cookie scoped to the stream path) the right to open its stream.
 */
@Controller('api/client')
export class ClientConnectController {
  constructor(
    private readonly access: WorkspaceAccess,
    private readonly workspaces: WorkspacesService,
    private readonly settings: SettingsService,
    private readonly config: AppConfig,
    private readonly startNotices: WorkspaceStartNotices,
    private readonly desktops: DesktopConnections,
  ) {}

  @Post('connect')
  @HttpCode(200)
  @PublicRoute()
  // Forged or expired credentials count against the address (429 past AUTH_FAILURES_PER_ADDRESS).
  @UseInterceptors(LimitFailedAuth)
  async connect(@Body() body: ConnectRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    if ((body.workspace_id === undefined) === (body.share_id === undefined)) {
      throw new ApiError(ErrorCode.InvalidRequest, 'Send exactly one of workspace_id and share_id');
    }
    const first = await this.describe(body, reply);
    if (!body.wait_while_starting || first.answer.operational_status !== 'starting') return first.answer;
    // Watch, then read again (a change between the first read and the watch is not missed), then wait.
    let watch: StartWatch | null = null;
    const closed = () => watch?.stop();
    reply.raw.once('close', closed);
    try {
      watch = await this.startNotices.watch(first.workspaceId, START_WAIT_MS);
      const again = await this.describe(body, reply);
      if (again.answer.operational_status !== 'starting' || reply.raw.destroyed) return again.answer;
      await watch.changed;
      return (await this.describe(body, reply)).answer;
    } finally {
      watch?.stop();
      reply.raw.off('close', closed);
    }
  }

  /** The link's workspace as the browser client sees it (and the stream cookie on the reply), and its id as stored. */
  private async describe(body: ConnectRequest, reply: FastifyReply) {
    const grant = await this.access.authorize(body.session_jwt, body.share_id !== undefined ? { shareId: body.share_id } : { workspaceId: body.workspace_id as string });
    const { workspace } = grant;
    // The stream comes next: its connection to the desktop is opened while this answer travels and the page opens it.
    if (workspace.status === 'running') this.desktops.warm(workspace);
    const { user } = grant;
    const [settings, policy] = await Promise.all([
      this.workspaces.settingsFor(workspace.userId as string),
      this.settings.get<string>('same_site_cookie_policy'),
    ]);
    void reply.header('set-cookie', streamCookie(body.session_jwt, policy, this.config.PUBLIC_BASE_URL.startsWith('https:')));
    const answer = {
      workspace_id: toWireId(workspace.id),
      user_id: toWireId(user.id),
      username: user.username,
      view_only: grant.viewOnly,
      operational_status: operationalStatus(workspace.status),
      operational_progress: workspace.operationalProgress,
      operational_message: workspace.operationalMessage,
      stream_path: `/${streamPath(workspace.id, 'vnc')}`,
      client_settings: withOverride(settings.clientSettings, workspace),
      x_res: workspace.image?.xRes ?? null,
      y_res: workspace.image?.yRes ?? null,
    };
    return { workspaceId: workspace.id, answer };
  }
}
