import { Injectable } from '@nestjs/common';
import { PermanentFailure } from '@ws/queue';
import { ProvisionStrategyProvider, Workspace, WorkspaceLifecycle } from '@ws/workspaces';
import type { HostlessProvisionStrategy, ProvisionAttempt } from '@ws/workspaces';
import { ServerSessionRuntime } from './server-session-runtime';

/** A VNC server image's workspace (mode `direct`): no container; it runs once the server answers RFB and takes the password. */
@Injectable()
@ProvisionStrategyProvider()
export class DirectVncStrategy implements HostlessProvisionStrategy {
  readonly name = 'direct VNC';
  readonly onDockerHost = false;

  constructor(
    private readonly sessions: ServerSessionRuntime,
    private readonly lifecycle: WorkspaceLifecycle,
  ) {}

  handles(workspace: Workspace): boolean {
    return workspace.serverConnection?.mode === 'direct';
  }

  /** Only what the check decided (the server's answer, a refused target); anything else is retried. */
  isPermanent(err: unknown): boolean {
    return err instanceof PermanentFailure;
  }

  async provision(workspace: Workspace, attempt: ProvisionAttempt): Promise<void> {
    const connection = workspace.serverConnection;
    if (connection?.mode !== 'direct') throw new PermanentFailure('The workspace has no VNC server connection');
    await this.lifecycle.progress(workspace.id, 50, `Connecting to the VNC server ${connection.host}:${connection.port}`);
    await this.sessions.checkDirect(workspace, connection);
    attempt.signal?.throwIfAborted();
    await this.lifecycle.running(workspace.id, { containerId: null, containerIp: null, hostPorts: {} });
  }
}
