import { Injectable } from '@nestjs/common';
import { DockerHosts, ExecResult } from '@ws/agent';
import { ApiError, ErrorCode, formatTimestamp, toWireId } from '@ws/common';
import { Server } from '@ws/servers';
import { toApiError as toStreamApiError, captureJpeg } from '@ws/stream';
import { agentFailure } from '../runtime/agent-failure';
import type { ExecCommandRequest, ExecConfigFields } from '../dto/workspace.requests';
import { Workspace } from '../workspace.entity';
import { toWorkspaceResponse } from '../reads/workspace.mappers';
import { WorkspaceSettings } from '../reads/workspace-settings.service';

const SCREENSHOT_SETTLE_MAX_MS = 900;

/** Where a workspace's VNC server is, and its password: the container's, or a VNC server image's own (@ws/server-sessions finds it). */
export interface VncEndpoint {
  host: string;
  port: number;
  password: string;
}

/**
 * Operations on a running workspace's container (exec_command_workspace, get_workspace_screenshot; the
 * stream statistics are StreamStatsService's). They take the workspace resolved at the request edge.
 */
@Injectable()
export class WorkspaceLive {
  constructor(
    private readonly hosts: DockerHosts,
    private readonly settings: WorkspaceSettings,
  ) {}

  /** Checked before the workspace is looked up, as the request's own shape. */
  static checkExecConfig(config: ExecConfigFields): void {
    if (config.user !== undefined && config.user !== 'root') {
      throw new ApiError(ErrorCode.InvalidRequest, `exec_config.user must be root or omitted (got ${config.user})`);
    }
  }

  async exec(workspace: Workspace, body: ExecCommandRequest) {
    const { exec_config: config } = body;
    WorkspaceLive.checkExecConfig(config);
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
    const settings = await this.settings.of(workspace.userId as string);
    return {
      workspace: toWorkspaceResponse(workspace, settings.clientSettings),
      current_time: formatTimestamp(new Date()),
      ...(result ? { exit_code: result.exitCode, stdout: result.stdout, stderr: result.stderr, output_truncated: result.truncated } : {}),
    };
  }

  /**
   * get_workspace_screenshot: the live framebuffer, read over RFB from `endpoint` (the caller's
   * WorkspaceServerSessions.vncEndpointOf: null when the workspace streams no desktop), as JPEG `width` wide (aspect kept).
   */
  async screenshot(workspace: Workspace, endpoint: VncEndpoint | null, width = 300): Promise<Buffer> {
    if (!endpoint) throw new ApiError(ErrorCode.InvalidState, `Workspace (${toWireId(workspace.id)}) has no desktop stream`);
    try {
      // A polling VNC server (x11vnc, which an image may use; Xvnc answers at once) sends what changed while nobody
      // watched about half a second after a fresh connection: wait for that, but no longer than
      // SCREENSHOT_SETTLE_MAX_MS on a desktop that never stops changing.
      const shot = await captureJpeg(endpoint.host, endpoint.port, {
        width, password: endpoint.password, timeoutMs: 15_000, settleMs: 600, maxSettleMs: SCREENSHOT_SETTLE_MAX_MS,
      });
      return shot.jpeg;
    } catch (err) {
      const refused = toStreamApiError(err);
      if (refused) throw refused;
      if (workspace.server) throw agentFailure(err, workspace.server);
      // A VNC server image's own server: it is not one of our Docker hosts.
      throw new ApiError(ErrorCode.Unavailable, `The VNC server ${endpoint.host}:${endpoint.port} did not answer: ${(err as Error).message}`);
    }
  }
}
