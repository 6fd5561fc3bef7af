import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { ExecCommandRequest, JoinWorkspaceRequest, OwnedWorkspaceRef, RequestWorkspaceRequest, WorkspaceRef, WorkspacesService, WorkspaceStatusRequest } from '@ws/workspaces';

@Controller('api/public')
export class WorkspacesController {
  constructor(private readonly workspaces: WorkspacesService) {}

  @Operation('request_workspace')
  request(@Body() body: RequestWorkspaceRequest) {
    return this.workspaces.request(body);
  }

  @Operation('get_workspace_status')
  status(@Body() body: WorkspaceStatusRequest) {
    return this.workspaces.status(body);
  }

  @Operation('join_workspace')
  join(@Body() body: JoinWorkspaceRequest) {
    return this.workspaces.join(body);
  }

  @Operation('destroy_workspace')
  async destroy(@Body() body: OwnedWorkspaceRef) {
    await this.workspaces.destroy(body);
    return {};
  }

  @Operation('keepalive')
  keepalive(@Body() body: WorkspaceRef) {
    return this.workspaces.keepalive(body.workspace_id);
  }

  @Operation('get_workspaces')
  list() {
    return this.workspaces.list();
  }

  @Operation('exec_command_workspace')
  exec(@Body() body: ExecCommandRequest) {
    return this.workspaces.exec(body);
  }
}
