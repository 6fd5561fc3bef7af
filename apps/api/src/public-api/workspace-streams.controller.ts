import { Body, Controller, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Operation } from '@ws/auth';
import { WorkspaceServerSessions } from '@ws/server-sessions';
import { ScreenshotRequest, StreamStatsService, WorkspaceClientRequest, WorkspaceLive, WorkspacesService } from '@ws/workspaces';

/** Operations that look into a running session: its pixels and the traffic of its connected clients. */
@Controller('api/public')
export class WorkspaceStreamsController {
  constructor(
    private readonly workspaces: WorkspacesService,
    private readonly live: WorkspaceLive,
    private readonly stats: StreamStatsService,
    private readonly serverSessions: WorkspaceServerSessions,
  ) {}

  @Operation('get_workspace_screenshot')
  async screenshot(@Body() body: ScreenshotRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const workspace = await this.workspaces.findRunning(body.workspace_id, body.user_id);
    const jpeg = await this.live.screenshot(workspace, this.serverSessions.vncEndpointOf(workspace), body.width);
    void reply.header('content-type', 'image/jpeg').header('cache-control', 'no-store');
    return jpeg;
  }

  @Operation('get_workspace_frame_stats')
  async frameStats(@Body() body: WorkspaceClientRequest) {
    return this.stats.frameStats(await this.workspaces.findRunning(body.workspace_id, body.user_id), body.client ?? 'auto');
  }

  @Operation('get_workspace_bottleneck_stats')
  async bottleneckStats(@Body() body: WorkspaceClientRequest) {
    return this.stats.bottleneckStats(await this.workspaces.findRunning(body.workspace_id, body.user_id));
  }
}
