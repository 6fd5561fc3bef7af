import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, IsNull, LessThan, Not, Repository } from 'typeorm';
import {
  buildContainerSpec, ContainerNotFoundError, WorkspaceContainerSpec, ContainerState, containerNameFor, DockerHost, DockerHosts, ensureWorkspaceNetwork, isTransientDockerError, networkExists, LABELS, WORKSPACE_NETWORK,
} from '@ws/agent';
import { AppConfig } from '@ws/common';
import { jobId, JobProducer, PermanentFailure } from '@ws/queue';
import { Server } from '@ws/servers';
import { Image } from '@ws/images';
import { LIVE_STATUSES, Workspace, WorkspaceServerConnection } from '../workspace.entity';
import { ServerSessionRuntime } from '../server-sessions/server-session-runtime';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import { WorkspaceTeardown } from '../lifecycle/workspace-teardown.service';
import { runStartCommands } from '../live/launch-commands';
import { ProfileStoreError, WorkspaceProfiles } from '../profiles/workspace-profiles.service';
import { WorkspaceEgress } from '../egress/workspace-egress.service';

const RFB_TIMEOUT_MS = 60_000;
/**
 * A `starting` or `stopping` row untouched this long may have lost its job (Redis lost it, or BullMQ failed it
 * without running it); the reaper makes sure one exists. A worker that died is not this path: its job is
 * taken over within seconds by the stall check. Ensuring is a no-op while the job waits or runs, so this only
 * needs to stay above the time a row normally goes untouched (one Docker call, or the desktop wait).
 */
const STUCK_AFTER_MS = 30_000;

/**
 * The worker's side of the lifecycle. Every step is safe to repeat: the container name is derived from
 * the workspace id (a retried create adopts it), and state changes go through WorkspaceLifecycle, which
 * applies them only from the expected status.
 */
@Injectable()
export class WorkspaceRuntime {
  private readonly logger = new Logger(WorkspaceRuntime.name);

  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    @InjectRepository(Server) private readonly servers: Repository<Server>,
    private readonly hosts: DockerHosts,
    private readonly teardown: WorkspaceTeardown,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly jobs: JobProducer,
    private readonly config: AppConfig,
    private readonly profiles: WorkspaceProfiles,
    private readonly egress: WorkspaceEgress,
    private readonly serverSessions: ServerSessionRuntime,
  ) {}

  /**
   * `signal` aborts when the worker hands the job back at shutdown: stop, and record nothing (another worker
   * finishes it). A run that finds the container already running (an earlier run died after starting it)
   * continues from the readiness wait instead of creating and starting again.
   */
  async provision(workspaceId: string, attempt: { final: boolean; signal?: AbortSignal }): Promise<void> {
    const workspace = await this.workspaces.findOne({ where: { id: workspaceId }, relations: { image: { attributes: true }, server: true, user: true } });
    if (!workspace || workspace.status !== 'starting') return; // destroyed meanwhile, or done by an earlier run
    const { image, server, serverConnection: connection } = workspace;
    if (connection?.mode === 'direct') return this.provisionDirect(workspace, connection, attempt);
    if (!image || !server) return this.fail(workspace, 'The workspace has no image or server');
    const host = this.hosts.get(server);
    try {
      const spec = connection ? this.serverSessions.containerSpec(workspace, image, server, connection) : await this.containerSpecOf(workspace, image, server);
      let state = await this.runningContainerOf(host, spec.name, spec.labels, spec.ports);
      if (!state) {
        await this.progress(workspace, 20, 'Creating the container');
        if (spec.network === WORKSPACE_NETWORK.name) await ensureWorkspaceNetwork(host); // isolated bridge, see docs/decisions.md
        else if (spec.network && !(await networkExists(host, spec.network))) {
          throw new PermanentFailure(`The Docker network ${spec.network} does not exist on the server ${server.hostname}; create it there (docker network create) or change the image's network_name`);
        }
        const { containerId } = await host.createWorkspaceContainer(spec);
        // Before the desktop starts: a bridge's connection, or the persistent profile (Reset, or load the saved one).
        if (connection) await this.serverSessions.writeConnection(host, containerId, workspace, connection);
        else await this.profiles.prepare(workspace, image, host, containerId);
        attempt.signal?.throwIfAborted();
        await this.lifecycle.progress(workspace.id, 40, 'Starting the container', { containerId });
        attempt.signal?.throwIfAborted();
        await host.start(containerId);
        state = await host.inspect(containerId, spec.ports);
      }
      const containerId = state.id;
      if (connection?.mode !== 'relay') {
        const vncPort = state.hostPorts.vnc;
        if (!vncPort) throw new PermanentFailure(`The image ${spec.image} publishes no vnc port`);
        await this.lifecycle.progress(workspace.id, 60, 'Waiting for the desktop', { containerId });
        await host.waitForRfb(server.publishHost, vncPort, { timeoutMs: RFB_TIMEOUT_MS, signal: attempt.signal });
      }
      if (connection) {
        await this.lifecycle.progress(workspace.id, 80, `Connecting to the ${connection.protocol.toUpperCase()} server ${connection.host}:${connection.port}`, { containerId });
        await this.serverSessions.waitUntilConnected(host, containerId, connection, attempt.signal);
      }
      attempt.signal?.throwIfAborted();
      const done = await this.lifecycle.running(workspace.id, { containerId, containerIp: state.ip, hostPorts: state.hostPorts });
      if (!done) await host.remove(containerId); // destroyed while starting: leave nothing behind
      // The image's exec_config (launch-commands.ts; never throws) runs in the user's own container only: a bridge
      // or relay holds the server's connection file, which a command as root could read.
      else if (!connection) await runStartCommands({ hosts: this.hosts, workspaces: this.workspaces }, workspace);
    } catch (err) {
      const permanent = err instanceof PermanentFailure || (!isTransientDockerError(err) && !(err instanceof ProfileStoreError));
      return this.afterFailedAttempt(workspace, err, attempt, permanent, () => host.remove(containerNameFor(workspace.id)));
    }
  }

  /**
   * A provision attempt that threw: handed back at shutdown (rethrown; the next run decides), failed for good (the
   * workspace fails with the message, `cleanup` removes what was made), or left to the job's retry (message shown).
   */
  private async afterFailedAttempt(
    workspace: Workspace, err: unknown, attempt: { final: boolean; signal?: AbortSignal }, permanent: boolean, cleanup?: () => Promise<unknown>,
  ): Promise<never> {
    if (attempt.signal?.aborted) throw err;
    const message = (err as Error).message;
    if (permanent || attempt.final) {
      await this.fail(workspace, message);
      await cleanup?.().catch(() => undefined);
      throw new PermanentFailure(message);
    }
    await this.progress(workspace, workspace.operationalProgress, `Retrying after: ${message}`);
    throw err;
  }

  /** The container of a container image's workspace (its request environment, egress, network and settings). */
  private async containerSpecOf(workspace: Workspace, image: Image, server: Server): Promise<WorkspaceContainerSpec> {
    // The egress gateway and credential win over the request's variables of the same names (README, "Egress").
    const environment = { ...workspace.environment, ...(await this.egress.environmentOf(workspace)) };
    return buildContainerSpec({
      workspace, image, server, user: workspace.user, allowedSecurityOpts: this.config.WORKSPACE_SECURITY_OPTS_ALLOWED, deploymentId: this.config.DEPLOYMENT_ID, environment,
      workspaceUrl: workspace.launchOptions.workspaceUrl, clientLanguage: workspace.launchOptions.clientLanguage, clientTimezone: workspace.launchOptions.clientTimezone,
      network: workspace.launchOptions.containerNetwork,
    });
  }

  /** A VNC server image's workspace has no container: it runs once the server answers and takes the password. */
  private async provisionDirect(workspace: Workspace, connection: WorkspaceServerConnection, attempt: { final: boolean; signal?: AbortSignal }): Promise<void> {
    try {
      await this.progress(workspace, 50, `Connecting to the VNC server ${connection.host}:${connection.port}`);
      await this.serverSessions.checkDirect(workspace, connection);
      attempt.signal?.throwIfAborted();
      await this.lifecycle.running(workspace.id, { containerId: null, containerIp: null, hostPorts: {} });
    } catch (err) {
      return this.afterFailedAttempt(workspace, err, attempt, err instanceof PermanentFailure);
    }
  }

  /** Ends a provision that keeps losing its worker: the workspace fails with the reason, its container goes. */
  async abandonProvision(workspaceId: string, reason: string): Promise<void> {
    const workspace = await this.workspaces.findOne({ where: { id: workspaceId }, relations: { server: true } });
    if (!workspace || workspace.status !== 'starting') return;
    await this.fail(workspace, reason);
    if (workspace.server) await this.hosts.get(workspace.server).remove(containerNameFor(workspace.id));
  }

  /** The workspace's container when it exists, is ours (labels) and runs; else null (create and start it). */
  private async runningContainerOf(host: DockerHost, name: string, labels: Record<string, string>, ports: Record<string, string>): Promise<ContainerState | null> {
    try {
      const state = await host.inspect(name, ports);
      const ours = Object.entries(labels).every(([k, v]) => state.labels[k] === v);
      return ours && state.running ? state : null;
    } catch (err) {
      if (err instanceof ContainerNotFoundError) return null;
      throw err;
    }
  }

  async destroy(workspaceId: string): Promise<void> {
    const workspace = await this.workspaces.findOne({ where: { id: workspaceId }, relations: { server: true, image: true } });
    if (!workspace || workspace.status === 'deleted') return;
    let note: string | undefined;
    if (workspace.server) {
      // By name as well as id: a provision that was cut short may have made a container it never recorded.
      const host = this.hosts.get(workspace.server);
      // Integration rule 5: removal is reported only after the profile's upload is confirmed (or refused).
      note = await this.profiles.saveBeforeRemoval(workspace, workspace.image, host);
      if (workspace.containerId) await host.remove(workspace.containerId);
      await host.remove(containerNameFor(workspace.id));
    }
    await this.lifecycle.destroyed(workspace.id, note);
  }

  /** Destroys expired and ownerless workspaces and re-enqueues work whose job was lost. */
  async reap(now = new Date()): Promise<void> {
    const expired = await this.workspaces.find({ where: { status: In(['starting', 'running', 'failed']), expirationDate: LessThan(now) }, select: { id: true } });
    for (const { id } of expired) await this.teardown.destroy(id, 'expired');
    // Once someone's, now no one's (its user deleted before the trigger of issue 19 guarded that): nobody's session, so it ends.
    const ownerless = await this.workspaces.find({ where: { status: In(['starting', 'running', 'failed']), userId: IsNull(), assignedAt: Not(IsNull()) }, select: { id: true } });
    for (const { id } of ownerless) await this.teardown.destroy(id, 'orphaned');
    const stuckBefore = new Date(now.getTime() - STUCK_AFTER_MS);
    const stuck = await this.workspaces.find({ where: { status: In(['starting', 'stopping']), updatedAt: LessThan(stuckBefore) }, select: { id: true, status: true } });
    for (const w of stuck) {
      if (w.status === 'starting') await this.jobs.ensure('workspace.provision', { workspaceId: w.id }, jobId.provision(w.id));
      else await this.jobs.ensure('workspace.destroy', { workspaceId: w.id, reason: 'requested' }, jobId.destroy(w.id));
    }
  }

  /** Removes this deployment's containers that no live workspace owns; fails running workspaces whose container vanished. */
  async reconcile(): Promise<{ removed: number; vanished: number }> {
    let removed = 0;
    let vanished = 0;
    for (const server of await this.servers.findBy({ enabled: true })) {
      const host = this.hosts.get(server);
      // Read before listing: a workspace that becomes running after the listing must not count as vanished.
      const runningBefore = await this.workspaces.find({ where: { serverId: server.id, status: 'running' }, select: { id: true } });
      let containers;
      try {
        containers = await host.listByLabels({ [LABELS.deploymentId]: this.config.DEPLOYMENT_ID });
      } catch (err) {
        this.logger.warn(`reconcile: server ${server.hostname} did not answer: ${(err as Error).message}`);
        continue;
      }
      const ids = containers.map((c) => c.labels[LABELS.workspaceId]).filter((id): id is string => !!id);
      const live = new Set((await this.workspaces.find({ where: { id: In(ids), status: In(LIVE_STATUSES) }, select: { id: true } })).map((w) => w.id));
      for (const container of containers) {
        if (!live.has(container.labels[LABELS.workspaceId] ?? '')) {
          await host.remove(container.id);
          removed++;
        }
      }
      const present = new Set(ids);
      for (const w of runningBefore.filter((r) => !present.has(r.id))) {
        if (await this.lifecycle.fail(w.id, 'running', 'The workspace container vanished from its server')) vanished++;
      }
    }
    return { removed, vanished };
  }

  private async progress(workspace: Workspace, percent: number, message: string): Promise<void> {
    await this.lifecycle.progress(workspace.id, percent, message);
  }

  private async fail(workspace: Workspace, message: string): Promise<void> {
    await this.lifecycle.fail(workspace.id, 'starting', `Could not start the workspace: ${message}`);
  }
}
