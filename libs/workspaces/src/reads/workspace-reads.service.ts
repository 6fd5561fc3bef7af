import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { ContainerNotFoundError, DockerHosts } from '@ws/agent';
import { ApiError, ErrorCode, formatTimestamp, toWireId } from '@ws/common';
import { creationOrder, KeysetList, listPage, PageRequest, rawQuery } from '@ws/database';
import { effectiveSettings } from '@ws/groups';
import { IssuedToken, SessionTokensService, UsersService } from '@ws/users';
import { agentFailure } from '../runtime/agent-failure';
import type { JoinWorkspaceRequest } from '../dto/workspace.requests';
import { findAllLive, findLiveWorkspace, type StatusWorkspace } from './workspace-lookup';
import { LIVE_STATUSES, Workspace } from '../workspace.entity';
import { connectPath, hostUnreachableMessage, joinPath, operationalStatus, serverHealthOf, toWorkspaceListItem, toWorkspaceResponse } from './workspace.mappers';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import { WorkspaceSettings } from './workspace-settings.service';

const now = () => new Date();
const LIVE_WORKSPACES_LIST: KeysetList = { name: 'workspaces', from: 'workspaces w', keys: creationOrder('w'), where: 'w.status = ANY($1)', params: [LIVE_STATUSES] };

/** The reading operations (get_workspace_status, get_workspaces, join_workspace) and their wire mapping. */
@Injectable()
export class WorkspaceReads {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly users: UsersService,
    private readonly tokens: SessionTokensService,
    private readonly settings: WorkspaceSettings,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly hosts: DockerHosts,
  ) {}

  /** get_workspace_status of a live workspace (resolved and owner-checked at the request edge). */
  async status(found: StatusWorkspace, skipAgentCheck = false) {
    let workspace = found;
    // Its host marked down: reported from the server's row, without asking the host (no call waits on it) or
    // touching the workspace, which is back as it was when the host answers.
    const unreachable = hostUnreachableMessage(workspace.server);
    if (unreachable !== null && workspace.server) {
      return {
        error_message: `Workspace (${toWireId(workspace.id)}) is unreachable: ${unreachable}`,
        operational_message: unreachable,
        operational_progress: workspace.operationalProgress,
        operational_status: operationalStatus(workspace.status),
        server: { server_id: toWireId(workspace.server.id), hostname: workspace.server.hostname, ...serverHealthOf(workspace.server) },
      };
    }
    if (workspace.status === 'running' && !skipAgentCheck) workspace = await this.checkContainer(workspace);
    if (workspace.status !== 'running') {
      return {
        error_message: notRunningMessage(workspace),
        operational_message: workspace.operationalMessage,
        operational_progress: workspace.operationalProgress,
        operational_status: operationalStatus(workspace.status),
      };
    }
    // Independent reads: the renewal and the owner's settings go to PostgreSQL together.
    const [link, settings] = await Promise.all([this.renewLink(workspace), this.settings.of(workspace.userId as string)]);
    return { current_time: formatTimestamp(now()), workspace_url: link, workspace: toWorkspaceResponse(workspace, settings.clientSettings) };
  }

  /** join_workspace: a view-only link to a shared workspace, for an existing or a new anonymous user. */
  async join(body: JoinWorkspaceRequest) {
    const workspace = await findLiveWorkspace(this.workspaces, { shareId: body.share_id });
    if (!workspace.sharingEnabled) throw new ApiError(ErrorCode.InvalidState, 'Sharing is not enabled for this workspace');
    // A viewer made for this join is tied to the workspace: it is removed when the workspace is (AnonymousUsers).
    const user = body.user_id !== undefined ? await this.users.findActive(body.user_id) : await this.users.createAnonymous({ joinedWorkspaceId: workspace.id });
    const issued = await this.tokens.create(toWireId(user.id), { view_only: true, workspace_id: workspace.id });
    const settings = await this.settings.of(workspace.userId as string);
    return {
      current_time: formatTimestamp(now()),
      session_token: issued.jwt,
      user_id: toWireId(user.id),
      username: user.username,
      workspace: { ...viewerResponse(toWorkspaceResponse(workspace, settings.clientSettings)), user: { username: user.username } },
      workspace_url: joinPath(workspace.shareId, user.id, issued.jwt),
    };
  }

  /**
   * get_workspaces: every live workspace, oldest first; or one page of them in creation order (`limit`, `cursor`:
   * a staged workspace's start moves when it is claimed, its creation never does).
   */
  async list(request: PageRequest = {}) {
    // The zones' names need nothing from the page: read beside it.
    const [{ rows, paging }, zoneRows] = await Promise.all([
      listPage(this.db, LIVE_WORKSPACES_LIST, request, () => findAllLive(this.workspaces), (ids) => findAllLive(this.workspaces, ids), (row) => row.workspace.id),
      rawQuery<{ id: string; name: string }>(this.db, 'SELECT id, name FROM zones'),
    ]);
    const zones = new Map(zoneRows.map((z) => [z.id, z.name]));
    const settings = await this.settings.ofMany(rows.map(({ workspace: w }) => w.userId).filter((id): id is string => !!id));
    return {
      current_time: formatTimestamp(now()),
      workspaces: rows.map(({ workspace: w, username }) =>
        toWorkspaceListItem(w, (settings.get(w.userId ?? '') ?? effectiveSettings([], 0)).clientSettings, username, w.server ? zones.get(w.server.zoneId) ?? null : null),
      ),
      ...paging,
    };
  }

  /** Asks the Docker host whether the container still runs; a vanished container fails the workspace. */
  private async checkContainer(workspace: StatusWorkspace): Promise<StatusWorkspace> {
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
  private async renewLink(workspace: Pick<Workspace, 'id' | 'userId' | 'sessionTokenId'>): Promise<string> {
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
}

/** What a view-only joiner is shown: the services it may use (no uploads, no microphone: both refused to joiners). */
function viewerResponse<T extends { port_map: Record<string, unknown> }>(response: T): T {
  const { uploads: _uploads, audio_input: _audioInput, ...shown } = response.port_map;
  return { ...response, port_map: shown };
}

function notRunningMessage(w: Pick<Workspace, 'id' | 'status' | 'operationalMessage'>): string {
  switch (w.status) {
    case 'starting':
      return `Workspace (${toWireId(w.id)}) is starting`;
    case 'stopping':
      return `Workspace (${toWireId(w.id)}) is being removed`;
    default:
      return `Workspace (${toWireId(w.id)}) is not running: ${w.operationalMessage}`;
  }
}
