import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { AgentError, ContainerNotFoundError, DockerHosts, ExecResult } from '@ws/agent';
import { addSeconds, ApiError, AppConfig, ErrorCode, formatTimestamp, newId, parseId, randomSecret, toWireId } from '@ws/common';
import { effectiveSettings, EffectiveGroupSettings, usageWindowStart } from '@ws/groups/group-settings';
import { GroupsService } from '@ws/groups/groups.service';
import { Image } from '@ws/images/image.entity';
import { ImagesService } from '@ws/images/images.service';
import { rawQuery } from '@ws/database/raw-query';
import { JobProducer, jobId } from '@ws/queue';
import { Server } from '@ws/servers/server.entity';
import { toApiError as toStreamApiError } from '@ws/stream/errors';
import { captureJpeg } from '@ws/stream/screenshot';
import { SettingsService } from '@ws/settings/settings.service';
import { SessionToken } from '@ws/users/session-token.entity';
import { IssuedToken, SessionTokensService } from '@ws/users/session-tokens.service';
import { User } from '@ws/users/user.entity';
import { UsersService } from '@ws/users/users.service';
import type { ExecCommandRequest, JoinWorkspaceRequest, OwnedWorkspaceRef, ScreenshotRequest, RequestWorkspaceRequest, WorkspaceStatusRequest } from './dto/workspace.requests';
import { reserveServer } from './placement';
import { StagedClaimSlot } from './staged-claim';
import { findAllLive, findLiveWorkspace } from './workspace-lookup';
import { Workspace } from './workspace.entity';
import { connectPath, joinPath, operationalStatus, toWorkspaceListItem, toWorkspaceResponse } from './workspace.mappers';
import { WorkspaceLifecycle } from './workspace-lifecycle.service';
import { WorkspaceTeardown } from './workspace-teardown.service';

const now = () => new Date();
const SCREENSHOT_SETTLE_MAX_MS = 900;

/** The workspace operations of the developer API. Slow work (containers) is the worker's; this decides and records. */
@Injectable()
export class WorkspacesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly users: UsersService,
    private readonly groups: GroupsService,
    private readonly images: ImagesService,
    private readonly tokens: SessionTokensService,
    private readonly settings: SettingsService,
    private readonly teardown: WorkspaceTeardown,
    private readonly stagedClaim: StagedClaimSlot,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly jobs: JobProducer,
    private readonly hosts: DockerHosts,
    private readonly config: AppConfig,
  ) {}

  async request(body: RequestWorkspaceRequest) {
    if (body.connection_info) throw new ApiError(ErrorCode.InvalidRequest, 'connection_info applies to RDP, VNC and SSH server sessions, not to container images');
    if (body.egress_gateway_id) throw ApiError.invalidId('egress_gateway_id', body.egress_gateway_id);
    const user = body.user_id !== undefined ? await this.users.findActive(body.user_id) : await this.users.createAnonymous();
    const settings = await this.settingsFor(user.id);
    const image = await this.resolveImage(user.id, body.image_id, settings);
    if (!image.enabled) throw new ApiError(ErrorCode.InvalidRequest, `Image (${toWireId(image.id)}) is disabled`);
    if (body.enable_sharing && !settings.clientSettings.allow_workspace_sharing) {
      throw new ApiError(ErrorCode.Forbidden, 'Sharing is not allowed for this user (client setting allow_workspace_sharing)');
    }
    // Claim step (staging, libs/staging): a matching staged workspace is handed over already running.
    const staged = await this.stagedClaim.claim({ user, image, settings, request: body });
    if (staged) {
      return {
        workspace_id: toWireId(staged.workspaceId), session_token: staged.jwt, username: user.username, status: 'running', share_id: staged.shareId,
        user_id: toWireId(user.id), workspace_url: connectPath(staged.workspaceId, user.id, staged.jwt),
      };
    }
    const workspaceId = newId();
    const issued = await this.tokens.create(toWireId(user.id), { workspace_id: workspaceId });
    const start = now();
    const profile = image.persistentProfilePath && body.persistent_profile_mode !== undefined ? body.persistent_profile_mode : null;
    let workspace: Workspace;
    try {
      workspace = await this.db.transaction(async (tx) => {
        const server = await reserveServer(tx, image);
        return this.lifecycle.record(tx, {
          id: workspaceId, userId: user.id, imageId: image.id, serverId: server.id, operationalMessage: 'Waiting for a worker', operationalProgress: 0,
          containerId: null, containerIp: null, hostPorts: {}, cores: image.cores, memory: image.memory, token: randomSecret(32), viewOnlyToken: randomSecret(32),
          shareId: randomSecret(16), sharingEnabled: body.enable_sharing ?? false, environment: body.environment ?? {}, sessionTokenId: issued.token.id,
          launchOptions: { clientLanguage: body.client_language, clientTimezone: body.client_timezone, workspaceUrl: body.workspace_url },
          persistentProfileMode: profile, isPersistentProfile: profile !== null && profile !== 'Disabled',
          startDate: start, keepaliveDate: start, expirationDate: addSeconds(start, settings.keepaliveExpiration), destroyedAt: null, destroyReason: null,
        });
      });
    } catch (err) {
      // No workspace came of it: the token goes, and so does a user made only for this request.
      await (user.anonymous ? this.db.getRepository(User).delete({ id: user.id }) : this.db.getRepository(SessionToken).delete({ id: issued.token.id }));
      throw err;
    }
    // After commit: a lost enqueue leaves a `starting` row that the reaper re-enqueues under the same job id.
    await this.jobs.enqueue('workspace.provision', { workspaceId: workspace.id }, { jobId: jobId.provision(workspace.id) });
    return {
      workspace_id: toWireId(workspace.id),
      session_token: issued.jwt,
      username: user.username,
      status: operationalStatus(workspace.status),
      share_id: workspace.shareId,
      user_id: toWireId(user.id),
      workspace_url: connectPath(workspace.id, user.id, issued.jwt),
    };
  }

  async status(body: WorkspaceStatusRequest) {
    let workspace = await this.findLive(body.workspace_id, body.user_id);
    if (workspace.status === 'running' && !body.skip_agent_check) workspace = await this.checkContainer(workspace);
    if (workspace.status !== 'running') {
      return {
        error_message: notRunningMessage(workspace),
        operational_message: workspace.operationalMessage,
        operational_progress: workspace.operationalProgress,
        operational_status: operationalStatus(workspace.status),
      };
    }
    const link = await this.renewLink(workspace);
    const settings = await this.settingsFor(workspace.userId as string);
    return { current_time: formatTimestamp(now()), workspace_url: link, workspace: toWorkspaceResponse(workspace, settings.clientSettings) };
  }

  /** join_workspace: a view-only link to a shared workspace, for an existing or a new anonymous user. */
  async join(body: JoinWorkspaceRequest) {
    const workspace = await findLiveWorkspace(this.workspaces, { shareId: body.share_id });
    if (!workspace.sharingEnabled) throw new ApiError(ErrorCode.InvalidState, 'Sharing is not enabled for this workspace');
    const user = body.user_id !== undefined ? await this.users.findActive(body.user_id) : await this.users.createAnonymous();
    const issued = await this.tokens.create(toWireId(user.id), { view_only: true, workspace_id: workspace.id });
    const settings = await this.settingsFor(workspace.userId as string);
    return {
      current_time: formatTimestamp(now()),
      session_token: issued.jwt,
      user_id: toWireId(user.id),
      username: user.username,
      workspace: { ...toWorkspaceResponse(workspace, settings.clientSettings), user: { username: user.username } },
      workspace_url: joinPath(workspace.shareId, user.id, issued.jwt),
    };
  }

  async destroy(body: OwnedWorkspaceRef): Promise<void> {
    const workspace = await this.findLive(body.workspace_id, body.user_id);
    await this.teardown.destroy(workspace.id, 'requested');
  }

  /** Resets the expiration from the user's keepalive_expiration unless the user's usage_limit is exceeded. */
  async keepalive(workspaceId: string): Promise<{ usage_reached: boolean }> {
    const workspace = await this.findLive(workspaceId);
    if (workspace.status !== 'running' && workspace.status !== 'starting') {
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) is ${operationalStatus(workspace.status)}`);
    }
    const settings = await this.settingsFor(workspace.userId as string);
    if (settings.usageLimit) {
      const used = await this.usedSeconds(workspace.userId as string, usageWindowStart(settings.usageLimit.interval, now()));
      if (used > settings.usageLimit.seconds) return { usage_reached: true };
    }
    const at = now();
    await this.workspaces.update({ id: workspace.id }, { keepaliveDate: at, expirationDate: addSeconds(at, settings.keepaliveExpiration) });
    return { usage_reached: false };
  }

  async list() {
    const rows = await findAllLive(this.workspaces);
    const zones = new Map((await rawQuery<{ id: string; name: string }>(this.db, 'SELECT id, name FROM zones')).map((z) => [z.id, z.name]));
    const settings = await this.settingsForMany(rows.map(({ workspace: w }) => w.userId).filter((id): id is string => !!id));
    return {
      current_time: formatTimestamp(now()),
      workspaces: rows.map(({ workspace: w, username }) =>
        toWorkspaceListItem(w, (settings.get(w.userId ?? '') ?? effectiveSettings([], 0)).clientSettings, username, w.server ? zones.get(w.server.zoneId) ?? null : null),
      ),
    };
  }

  async exec(body: ExecCommandRequest) {
    const { exec_config: config } = body;
    if (config.user !== undefined && config.user !== 'root') {
      throw new ApiError(ErrorCode.InvalidRequest, `exec_config.user must be root or omitted (got ${config.user})`);
    }
    const workspace = await this.findRunning(body.workspace_id, body.user_id);
    const server = workspace.server as Server;
    const containerId = workspace.containerId as string;
    const host = this.hosts.get(server);
    const options = { cmd: config.cmd, environment: config.environment, workdir: config.workdir, privileged: config.privileged, user: config.user as 'root' | undefined };
    let result: ExecResult | null = null;
    try {
      if (body.wait) result = await host.exec(containerId, { ...options, wait: true, timeoutMs: (body.timeout_seconds ?? 60) * 1000 });
      else await host.exec(containerId, { ...options, wait: false });
    } catch (err) {
      throw agentFailure(err, server);
    }
    const settings = await this.settingsFor(workspace.userId as string);
    return {
      workspace: toWorkspaceResponse(workspace, settings.clientSettings),
      current_time: formatTimestamp(now()),
      ...(result ? { exit_code: result.exitCode, stdout: result.stdout, stderr: result.stderr, output_truncated: result.truncated } : {}),
    };
  }

  /** get_workspace_screenshot: the live framebuffer, read over RFB, as JPEG `width` wide (aspect kept). */
  async screenshot(body: ScreenshotRequest): Promise<Buffer> {
    const workspace = await this.findRunning(body.workspace_id, body.user_id);
    const server = workspace.server as Server;
    try {
      // x11vnc sends what changed while nobody watched about half a second after a fresh connection: wait for
      // that, but no longer than SCREENSHOT_SETTLE_MAX_MS on a desktop that never stops changing.
      const shot = await captureJpeg(server.publishHost, workspace.hostPorts.vnc, {
        width: body.width ?? 300, password: workspace.token, timeoutMs: 15_000, settleMs: 600, maxSettleMs: SCREENSHOT_SETTLE_MAX_MS,
      });
      return shot.jpeg;
    } catch (err) {
      throw toStreamApiError(err) ?? agentFailure(err, server);
    }
  }

  /** A running workspace: with its server, container and published VNC port. */
  async findRunning(workspaceId: string, userId?: string): Promise<Workspace> {
    const workspace = await this.findLive(workspaceId, userId);
    if (workspace.status !== 'running' || !workspace.server || !workspace.containerId || !workspace.hostPorts.vnc) {
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) is not running (${operationalStatus(workspace.status)})`);
    }
    return workspace;
  }

  /** A live workspace with image and server; `userId`, when given, must be its owner. */
  async findLive(workspaceId: string, userId?: string): Promise<Workspace> {
    const workspace = await findLiveWorkspace(this.workspaces, { workspaceId });
    if (userId !== undefined && parseId(userId) !== workspace.userId) throw ApiError.invalidId('workspace_id', workspaceId);
    return workspace;
  }

  async settingsFor(userId: string): Promise<EffectiveGroupSettings> {
    return (await this.settingsForMany([userId])).get(userId) as EffectiveGroupSettings;
  }

  private async settingsForMany(userIds: string[]): Promise<Map<string, EffectiveGroupSettings>> {
    const [groups, fallback] = await Promise.all([this.groups.groupsOf(userIds), this.settings.get<number>('default_keepalive_expiration')]);
    return new Map(userIds.map((id) => [id, effectiveSettings(groups.get(id) ?? [], fallback)]));
  }

  /** image_id, else the user's default image, else their groups'. */
  private async resolveImage(userId: string, imageId: string | undefined, settings: EffectiveGroupSettings): Promise<Image> {
    if (imageId !== undefined) return this.images.find(imageId);
    const attributes = await this.users.getAttributes(toWireId(userId));
    const fallback = attributes.defaultImageId ?? settings.defaultImageId;
    if (!fallback) throw new ApiError(ErrorCode.InvalidRequest, 'image_id is required: the user and their groups have no default image');
    return this.images.find(fallback);
  }

  /** Asks the Docker host whether the container still runs; a vanished container fails the workspace. */
  private async checkContainer(workspace: Workspace): Promise<Workspace> {
    if (!workspace.server || !workspace.containerId) return workspace;
    let running: boolean;
    let detail = '';
    try {
      const state = await this.hosts.get(workspace.server).inspect(workspace.containerId);
      running = state.running;
      detail = `${state.status}${state.exitCode !== null ? `, exit code ${state.exitCode}` : ''}${state.oomKilled ? ', out of memory' : ''}`;
    } catch (err) {
      if (!(err instanceof ContainerNotFoundError)) throw agentFailure(err, workspace.server);
      running = false;
      detail = 'removed';
    }
    if (running) return workspace;
    const message = `The workspace container stopped (${detail})`;
    await this.lifecycle.fail(workspace.id, 'running', message);
    return { ...workspace, status: 'failed', operationalMessage: message };
  }

  /** A new connection link: renews the owner's session token, so every earlier link stops working. */
  private async renewLink(workspace: Workspace): Promise<string> {
    const userId = workspace.userId as string;
    let issued: IssuedToken | null = workspace.sessionTokenId ? await this.tokens.renewIfLive(workspace.sessionTokenId, { workspace_id: workspace.id }) : null;
    if (!issued) {
      // The token was revoked (logout_user) or expired: the integrator's backend may hand out a fresh one.
      const fresh = await this.tokens.create(toWireId(userId));
      await this.workspaces.update({ id: workspace.id }, { sessionTokenId: fresh.token.id });
      issued = await this.tokens.renew(fresh.token, { workspace_id: workspace.id });
    }
    return connectPath(workspace.id, userId, issued.jwt);
  }

  private async usedSeconds(userId: string, windowStart: Date): Promise<number> {
    const [row] = await this.db.query(
      `SELECT COALESCE(SUM(EXTRACT(EPOCH FROM (COALESCE(destroyed_at, now()) - GREATEST(start_date, $2)))), 0) AS used
         FROM workspaces WHERE user_id = $1 AND COALESCE(destroyed_at, now()) > $2`,
      [userId, windowStart],
    );
    return Number((row as { used: string }).used);
  }
}

function notRunningMessage(w: Workspace): string {
  switch (w.status) {
    case 'starting':
      return `Workspace (${toWireId(w.id)}) is starting`;
    case 'stopping':
      return `Workspace (${toWireId(w.id)}) is being removed`;
    default:
      return `Workspace (${toWireId(w.id)}) is not running: ${w.operationalMessage}`;
  }
}

export function agentFailure(err: unknown, server: Pick<Server, 'hostname'>): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof AgentError) {
    // The agent classifies its errors; a daemon failure it cannot explain reads as the host being unavailable.
    const code = err.apiCode === ErrorCode.Internal ? ErrorCode.Unavailable : err.apiCode;
    return new ApiError(code, `Server ${server.hostname}: ${err.message}`);
  }
  return new ApiError(ErrorCode.Unavailable, `Server ${server.hostname} did not answer: ${(err as Error).message}`);
}

