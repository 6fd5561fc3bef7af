import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { addSeconds, ApiError, ErrorCode, parseId, toWireId } from '@ws/common';
import { EffectiveGroupSettings, usageWindowStart } from '@ws/groups';
import { findLiveWorkspace, findLiveWorkspaceStatus, type StatusWorkspace } from './reads/workspace-lookup';
import { Workspace } from './workspace.entity';
import { operationalStatus } from './reads/workspace.mappers';
import { WorkspaceSettings } from './reads/workspace-settings.service';
import { WorkspaceTeardown } from './lifecycle/workspace-teardown.service';

const now = () => new Date();

/**
 * A caller's workspace by its wire id (the request edge's lookup: parsed, live, owner-checked) and the
 * session upkeep (keepalive, destroy). Launching is WorkspaceLaunch's, reading WorkspaceReads', live
 * container operations WorkspaceLive's; state changes are WorkspaceLifecycle's.
 */
@Injectable()
export class WorkspacesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly settings: WorkspaceSettings,
    private readonly teardown: WorkspaceTeardown,
  ) {}

  async destroy(workspace: Workspace): Promise<void> {
    await this.teardown.destroy(workspace.id, 'requested');
  }

  /** Resets the expiration from the user's keepalive_expiration unless the user's usage_limit is exceeded. */
  async keepalive(workspace: Workspace): Promise<{ usage_reached: boolean }> {
    if (workspace.status !== 'running' && workspace.status !== 'starting') {
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${toWireId(workspace.id)}) is ${operationalStatus(workspace.status)}`);
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

  /**
   * A running workspace with what the operation needs: a VNC stream (`stream`: screenshots, stream stats; a native
   * RDP client's relay has none), or a container of its own (`container`: exec; a server session's bridge is ours,
   * not the user's machine).
   */
  async findRunning(workspaceId: string, userId: string, needs: 'stream' | 'container' = 'stream'): Promise<Workspace> {
    const workspace = await this.findLive(workspaceId, userId);
    const connection = workspace.serverConnection;
    if (workspace.status === 'running' && connection) {
      const server = `the ${connection.protocol.toUpperCase()} server ${connection.host}:${connection.port}`;
      if (needs === 'container') throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) reaches ${server}; commands run only in container workspaces`);
      if (connection.mode === 'relay') throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) is reached with a native RDP client (get_rdp_client_connection_info); it has no web stream`);
      if (connection.mode === 'direct') return workspace;
    }
    if (workspace.status !== 'running' || !workspace.server || !workspace.containerId || !workspace.hostPorts.vnc) {
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceId}) is not running (${operationalStatus(workspace.status)})`);
    }
    return workspace;
  }

  /**
   * A live workspace with image and server, owned by `userId`: another user's workspace answers as an unknown id.
   * The owner is always checked; the operations that take it require user_id (a 400 naming it when missing).
   */
  async findLive(workspaceId: string, userId: string): Promise<Workspace> {
    const workspace = await findLiveWorkspace(this.workspaces, { workspaceId });
    if (parseId(userId) !== workspace.userId) throw ApiError.invalidId('workspace_id', workspaceId);
    return workspace;
  }

  /** findLive for get_workspace_status: of the image, only what the wire shows. */
  async findLiveStatus(workspaceId: string, userId: string): Promise<StatusWorkspace> {
    const workspace = await findLiveWorkspaceStatus(this.workspaces, workspaceId);
    if (parseId(userId) !== workspace.userId) throw ApiError.invalidId('workspace_id', workspaceId);
    return workspace;
  }

  /** A live workspace by id alone: keepalive, whose contract body is `workspace_id` only. */
  findLiveById(workspaceId: string): Promise<Workspace> {
    return findLiveWorkspace(this.workspaces, { workspaceId });
  }

  settingsFor(userId: string): Promise<EffectiveGroupSettings> {
    return this.settings.of(userId);
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
