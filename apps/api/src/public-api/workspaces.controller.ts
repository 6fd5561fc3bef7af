import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { PageRequest } from '@ws/database';
import {
  ExecCommandRequest, JoinWorkspaceRequest, OwnedWorkspaceRef, RequestWorkspaceRequest, WorkspaceLaunch, WorkspaceLive, WorkspaceReads, WorkspaceRef, WorkspacesService,
  WorkspaceStatusRequest,
} from '@ws/workspaces';
import { WorkspaceServerSessions } from '@ws/server-sessions';

/**
 * The request edge of the workspace operations: wire ids are parsed, looked up and owner-checked here
 * (WorkspacesService.findLive / findRunning), and the services get the workspace itself.
 */
@Controller('api/public')
export class WorkspacesController {
  constructor(
    private readonly workspaces: WorkspacesService,
    private readonly launch: WorkspaceLaunch,
    private readonly reads: WorkspaceReads,
    private readonly live: WorkspaceLive,
    private readonly serverSessions: WorkspaceServerSessions,
  ) {}

  @Operation('request_workspace')
  request(@Body() body: RequestWorkspaceRequest) {
    return this.launch.request(body);
  }

  @Operation('get_workspace_status')
  async status(@Body() body: WorkspaceStatusRequest) {
    return this.reads.status(await this.workspaces.findLiveStatus(body.workspace_id, body.user_id), body.skip_agent_check);
  }

  @Operation('join_workspace')
  join(@Body() body: JoinWorkspaceRequest) {
    return this.reads.join(body);
  }

  @Operation('destroy_workspace')
  async destroy(@Body() body: OwnedWorkspaceRef) {
    await this.workspaces.destroy(await this.workspaces.findLive(body.workspace_id, body.user_id));
    return {};
  }

  @Operation('keepalive')
  async keepalive(@Body() body: WorkspaceRef) {
    return this.workspaces.keepalive(await this.workspaces.findLiveById(body.workspace_id));
  }

  @Operation('get_workspaces')
  list(@Body() body: PageRequest) {
    return this.reads.list(body);
  }

  @Operation('exec_command_workspace')
  async exec(@Body() body: ExecCommandRequest) {
    WorkspaceLive.checkExecConfig(body.exec_config);
    return this.live.exec(await this.workspaces.findRunning(body.workspace_id, body.user_id, 'container'), body);
  }

  @Operation('get_rdp_client_connection_info')
  async rdpClientConnection(@Body() body: OwnedWorkspaceRef) {
    return this.serverSessions.rdpClientConnection(await this.workspaces.findLive(body.workspace_id, body.user_id));
  }
}
