import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { buildContainerSpec, DockerHosts, isTransientDockerError, WorkspaceContainerSpec } from '@ws/agent';
import { AppConfig } from '@ws/common';
import { PermanentFailure } from '@ws/queue';
import { Workspace } from '../workspace.entity';
import { runStartCommands } from '../live/launch-commands';
import { ProfileStoreError, WorkspaceProfiles } from '../profiles/workspace-profiles.service';
import { EgressSidecars } from '../egress/egress-sidecars';
import { WorkspaceEgress } from '../egress/workspace-egress.service';
import { HostedProvisionStrategy, ProvisionAttempt, ProvisionStrategyProvider, ProvisionTarget } from './provision-strategy';
import { NetworkHolders } from './network-holders';
import { WorkspaceContainers } from './workspace-containers';

/**
 * A container image's workspace (every workspace that is not a server session): the user's own desktop container,
 * with its request environment, egress, network and settings, its persistent profile loaded before it starts, and
 * the image's exec_config run once it is up.
 */
@Injectable()
@ProvisionStrategyProvider()
export class ContainerStrategy implements HostedProvisionStrategy {
  readonly name = 'container';
  readonly onDockerHost = true;

  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly hosts: DockerHosts,
    private readonly config: AppConfig,
    private readonly profiles: WorkspaceProfiles,
    private readonly egress: WorkspaceEgress,
    private readonly containers: WorkspaceContainers,
    private readonly sidecars: EgressSidecars,
    private readonly holders: NetworkHolders,
  ) {}

  handles(workspace: Workspace): boolean {
    return !workspace.serverConnection;
  }

  isPermanent(err: unknown): boolean {
    return err instanceof PermanentFailure || (!isTransientDockerError(err) && !(err instanceof ProfileStoreError));
  }

  async provision(workspace: Workspace, target: ProvisionTarget, attempt: ProvisionAttempt): Promise<void> {
    const { image, host } = target;
    let spec = await this.containerSpecOf(workspace, target);
    // A gateway whose provider runs in a sidecar: the sidecar first (tunnel up, kill switch, the published ports);
    // the workspace container then joins its network namespace.
    const egress = await this.egress.sidecarOf(workspace);
    const sidecar = egress && (await this.sidecars.start(workspace, host, spec, egress, attempt.signal));
    // Else a network namespace made in advance, when one is free (network-holders.ts): same ports, no setup.
    const holder = sidecar ? null : await this.holders.claim(workspace.id, target.server, spec);
    const namespace = sidecar ? { containerId: sidecar.id, ip: sidecar.ip, hostPorts: sidecar.hostPorts } : holder;
    if (namespace) spec = { ...spec, networkContainer: namespace.containerId };
    // Before the desktop starts: the persistent profile (Reset, or load the saved one).
    let state = await this.containers.start(workspace, target, spec, (containerId) => this.profiles.prepare(workspace, image, host, containerId), attempt.signal);
    if (namespace) state = { ...state, ip: namespace.ip, hostPorts: namespace.hostPorts };
    await this.containers.waitForDesktop(workspace, target, state, spec, attempt.signal);
    // The image's exec_config (launch-commands.ts; never throws), in the user's own container only.
    if (await this.containers.markRunning(workspace, target, state, attempt.signal)) await runStartCommands({ hosts: this.hosts, workspaces: this.workspaces }, workspace);
  }

  private async containerSpecOf(workspace: Workspace, { image, server }: ProvisionTarget): Promise<WorkspaceContainerSpec> {
    // The egress gateway and credential win over the request's variables of the same names (README, "Egress").
    const environment = { ...workspace.environment, ...(await this.egress.environmentOf(workspace)) };
    return buildContainerSpec({
      workspace, image, server, user: workspace.user, allowedSecurityOpts: this.config.WORKSPACE_SECURITY_OPTS_ALLOWED, deploymentId: this.config.DEPLOYMENT_ID, environment,
      workspaceUrl: workspace.launchOptions.workspaceUrl, clientLanguage: workspace.launchOptions.clientLanguage, clientTimezone: workspace.launchOptions.clientTimezone,
      network: workspace.launchOptions.containerNetwork,
    });
  }
}
