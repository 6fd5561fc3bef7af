import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AgentModule } from '@ws/agent/agent.module';
import { ImagesModule } from '@ws/images/images.module';
import { Server } from '@ws/servers/server.entity';
import { SessionToken } from '@ws/users/session-token.entity';
import { UsersModule } from '@ws/users/users.module';
import { Zone } from '@ws/zones/zone.entity';
import { UserDeletion } from './user-deletion.service';
import { AnonymousUsers } from './anonymous-users.service';
import { ServerSessionRuntime } from './server-session-runtime';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';
import { Workspace } from './workspace.entity';
import { WorkspaceLifecycle } from './workspace-lifecycle.service';
import { WorkspaceRuntime } from './workspace-runtime.service';
import { WorkspaceTeardown } from './workspace-teardown.service';
import { WorkspacesService } from './workspaces.service';
import { WorkspaceLaunch } from './workspace-launch.service';
import { WorkspaceLive } from './workspace-live.service';
import { WorkspaceReads } from './workspace-reads.service';
import { WorkspaceSettings } from './workspace-settings.service';
import { WorkspaceAccess } from './workspace-access.service';
import { StreamStatsService } from './stream-stats.service';
import { StagedClaimSlot } from './staged-claim';
import { LaunchCommands } from './launch-commands';
import { WorkspaceProfiles } from './workspace-profiles.service';
import { ProfilesModule } from '@ws/profiles/profiles.module';
import { EgressModule } from '@ws/egress/egress.module';
import { WorkspaceEgress } from './workspace-egress.service';

@Module({
  imports: [TypeOrmModule.forFeature([Workspace, Server, Zone, SessionToken]), UsersModule, ImagesModule, AgentModule, ProfilesModule, EgressModule],
  providers: [WorkspaceServerSessions, ServerSessionRuntime, WorkspaceEgress, WorkspaceProfiles, WorkspaceLifecycle, WorkspaceSettings, WorkspaceLaunch, WorkspaceReads, WorkspaceLive, StagedClaimSlot, WorkspaceTeardown, UserDeletion, AnonymousUsers, WorkspacesService, WorkspaceRuntime, WorkspaceAccess, StreamStatsService, LaunchCommands],
  exports: [WorkspaceServerSessions, WorkspaceEgress, WorkspaceProfiles, WorkspaceLifecycle, WorkspaceSettings, WorkspaceLaunch, WorkspaceReads, WorkspaceLive, StagedClaimSlot, WorkspaceTeardown, UserDeletion, AnonymousUsers, WorkspacesService, WorkspaceRuntime, WorkspaceAccess, StreamStatsService, LaunchCommands, UsersModule, ImagesModule, AgentModule],
})
export class WorkspacesModule {}
