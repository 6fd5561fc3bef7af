import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AgentModule } from '@ws/agent';
import { ImagesModule } from '@ws/images';
import { ServersModule, Server } from '@ws/servers';
import { SessionToken, UsersModule } from '@ws/users';
import { Zone } from '@ws/zones';
import { UserDeletion } from './lifecycle/user-deletion.service';
import { UserWorkspaces } from './reads/user-workspaces';
import { ServerRetirement } from './lifecycle/server-retirement';
import { AnonymousUsers } from './lifecycle/anonymous-users.service';
import { Workspace } from './workspace.entity';
import { WorkspaceEvent, WorkspaceEventCursor, WorkspaceEventDelivery, WorkspaceEventSequencer } from './lifecycle/events/workspace-event.entity';
import { OutboxSignal } from './lifecycle/events/outbox-signal';
import { WorkspaceLifecycle } from './lifecycle/workspace-lifecycle.service';
import { WorkspaceRuntime } from './runtime/workspace-runtime.service';
import { ProvisionStrategies } from './runtime/provision-strategies';
import { ContainerStrategy } from './runtime/container.strategy';
import { WorkspaceContainers } from './runtime/workspace-containers';
import { WorkspaceTeardown } from './lifecycle/workspace-teardown.service';
import { WorkspacesService } from './workspaces.service';
import { WorkspaceLaunch } from './launch/workspace-launch.service';
import { LaunchRecorder } from './launch/launch-recorder.service';
import { LaunchSteps } from './launch/launch-steps';
import { CheckLimitsStep } from './launch/steps/check-limits.step';
import { EgressStep } from './launch/steps/egress.step';
import { PersistentProfileStep } from './launch/steps/persistent-profile.step';
import { WorkspaceLive } from './live/workspace-live.service';
import { WorkspaceReads } from './reads/workspace-reads.service';
import { WorkspaceSettings } from './reads/workspace-settings.service';
import { WorkspaceAccess } from './reads/workspace-access.service';
import { WorkspaceStartNotices } from './reads/workspace-start-notices';
import { StreamStatsService } from './reads/stream-stats.service';
import { LaunchCommands } from './live/launch-commands';
import { WorkspaceProfiles } from './profiles/workspace-profiles.service';
import { ProfilesModule } from '@ws/profiles';
import { EgressModule } from '@ws/egress';
import { EgressSidecars } from './egress/egress-sidecars';
import { NetworkHolders } from './runtime/network-holders';
import { EgressTunnelHealth } from './egress/egress-tunnel-health';
import { WorkspaceEgress } from './egress/workspace-egress.service';

@Module({
  imports: [TypeOrmModule.forFeature([Workspace, WorkspaceEvent, WorkspaceEventCursor, WorkspaceEventDelivery, WorkspaceEventSequencer, Server, Zone, SessionToken]), DiscoveryModule, UsersModule, ImagesModule, ServersModule, AgentModule, ProfilesModule, EgressModule],
  providers: [OutboxSignal, ServerRetirement, UserWorkspaces, WorkspaceEgress, EgressSidecars, EgressTunnelHealth, WorkspaceProfiles, WorkspaceLifecycle, WorkspaceSettings, WorkspaceLaunch, LaunchSteps, LaunchRecorder, CheckLimitsStep, PersistentProfileStep, EgressStep, WorkspaceReads, WorkspaceLive, WorkspaceTeardown, UserDeletion, AnonymousUsers, WorkspacesService, WorkspaceRuntime, ProvisionStrategies, WorkspaceContainers, NetworkHolders, ContainerStrategy, WorkspaceAccess, WorkspaceStartNotices, StreamStatsService, LaunchCommands],
  exports: [OutboxSignal, LaunchRecorder, ServerRetirement, UserWorkspaces, WorkspaceEgress, EgressTunnelHealth, WorkspaceContainers, WorkspaceProfiles, WorkspaceLifecycle, WorkspaceSettings, WorkspaceLaunch, WorkspaceReads, WorkspaceLive, WorkspaceTeardown, UserDeletion, AnonymousUsers, WorkspacesService, WorkspaceRuntime, WorkspaceAccess, WorkspaceStartNotices, StreamStatsService, LaunchCommands],
})
export class WorkspacesModule {}
