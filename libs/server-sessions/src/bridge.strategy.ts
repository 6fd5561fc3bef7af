import { Injectable } from '@nestjs/common';
import { isTransientDockerError } from '@ws/agent';
import { PermanentFailure } from '@ws/queue';
import { ProvisionStrategyProvider, Workspace, WorkspaceContainers, WorkspaceLifecycle } from '@ws/workspaces';
import type { HostedProvisionStrategy, ProvisionAttempt, ProvisionTarget, WorkspaceServerConnection } from '@ws/workspaces';
import { ServerSessionRuntime } from './server-session-runtime';

/**
 * An RDP or SSH server's workspace (mode `bridge`: a desktop container running xfreerdp or ssh, streamed like any
 * workspace) and a native RDP client's (mode `relay`: a container that relays RDP, no desktop). The container is
 * made like any workspace's; its connection file is written before it starts, and it runs once the bridge's
 * client or the relay reached the server. No exec_config: the container holds the server's connection file.
 */
@Injectable()
@ProvisionStrategyProvider()
export class BridgeStrategy implements HostedProvisionStrategy {
  readonly name = 'bridge';
  readonly onDockerHost = true;

  constructor(
    private readonly sessions: ServerSessionRuntime,
    private readonly containers: WorkspaceContainers,
    private readonly lifecycle: WorkspaceLifecycle,
  ) {}

  handles(workspace: Workspace): boolean {
    return bridged(workspace.serverConnection) !== null;
  }

  isPermanent(err: unknown): boolean {
    return err instanceof PermanentFailure || !isTransientDockerError(err);
  }

  async provision(workspace: Workspace, target: ProvisionTarget, attempt: ProvisionAttempt): Promise<void> {
    const connection = bridged(workspace.serverConnection);
    if (!connection) throw new PermanentFailure('The workspace has no RDP or SSH server connection');
    const { image, server, host } = target;
    const spec = this.sessions.containerSpec(workspace, image, server, connection);
    const state = await this.containers.start(workspace, target, spec, (containerId) => this.sessions.writeConnection(host, containerId, workspace, connection), attempt.signal);
    if (connection.mode !== 'relay') await this.containers.waitForDesktop(workspace, target, state, spec, attempt.signal);
    await this.lifecycle.progress(workspace.id, 80, `Connecting to the ${connection.protocol.toUpperCase()} server ${connection.host}:${connection.port}`, { containerId: state.id });
    await this.sessions.waitUntilConnected(host, state.id, connection, attempt.signal);
    await this.containers.markRunning(workspace, target, state, attempt.signal);
  }
}

/** The connection of a workspace reached through a bridge or relay container, else null. */
function bridged(connection: WorkspaceServerConnection | null): WorkspaceServerConnection | null {
  return connection && connection.mode !== 'direct' ? connection : null;
}
