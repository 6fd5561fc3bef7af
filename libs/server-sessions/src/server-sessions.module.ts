import { Module } from '@nestjs/common';
import { AgentModule } from '@ws/agent';
import { ImagesModule } from '@ws/images';
import { WorkspacesModule } from '@ws/workspaces';
import { BridgeStrategy } from './bridge.strategy';
import { DirectVncStrategy } from './direct-vnc.strategy';
import { ServerConnectionStep } from './server-connection.step';
import { ServerSessionRuntime } from './server-session-runtime';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';

/**
 * Server sessions (issue 14): the launch step that resolves a server image's connection, and the provision
 * strategies of its workspaces (bridge or relay container, direct VNC). Both are found by @ws/workspaces through
 * discovery; an app that launches (api) or provisions (worker) imports this module.
 */
@Module({
  imports: [WorkspacesModule, ImagesModule, AgentModule],
  providers: [WorkspaceServerSessions, ServerSessionRuntime, ServerConnectionStep, BridgeStrategy, DirectVncStrategy],
  exports: [WorkspaceServerSessions],
})
export class ServerSessionsModule {}
