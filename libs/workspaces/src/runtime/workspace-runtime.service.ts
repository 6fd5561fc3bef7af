import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, IsNull, LessThan, Not, Repository } from 'typeorm';
import { containerNameFor, DockerHost, DockerHosts, egressSidecarNameFor, LABELS } from '@ws/agent';
import { AppConfig } from '@ws/common';
import { rawQuery } from '@ws/database';
import { Metrics } from '@ws/metrics';
import { jobId, JobProducer, PermanentFailure } from '@ws/queue';
import { Server } from '@ws/servers';
import { findWorkspaceToProvision } from '../reads/workspace-lookup';
import { LIVE_STATUSES, Workspace } from '../workspace.entity';
import { WorkspaceEgress } from '../egress/workspace-egress.service';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import { WorkspaceTeardown } from '../lifecycle/workspace-teardown.service';
import { WorkspaceProfiles } from '../profiles/workspace-profiles.service';
import { isHolder, NetworkHolders } from './network-holders';
import { ProvisionStrategies } from './provision-strategies';
import type { ProvisionAttempt, ProvisionStrategy } from './provision-strategy';

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
    private readonly strategies: ProvisionStrategies,
    private readonly egress: WorkspaceEgress,
    private readonly metrics: Metrics,
    private readonly holders: NetworkHolders,
  ) {}

  /**
   * `signal` aborts when the worker hands the job back at shutdown: stop, and record nothing (another worker
   * finishes it). The kind of workspace decides how it is made (ProvisionStrategies: the desktop container here,
   * a server session's bridge, relay or direct VNC server from @ws/server-sessions); a run that finds the container
   * already running (an earlier run died after starting it) continues from the readiness wait.
   */
  async provision(workspaceId: string, attempt: ProvisionAttempt): Promise<void> {
    const workspace = await findWorkspaceToProvision(this.workspaces, workspaceId);
    if (!workspace || workspace.status !== 'starting') return; // destroyed meanwhile, or done by an earlier run
    let strategy: ProvisionStrategy;
    try {
      strategy = this.strategies.for(workspace);
    } catch (err) {
      return this.afterFailedAttempt(workspace, err, attempt, true);
    }
    if (!strategy.onDockerHost) {
      try {
        await strategy.provision(workspace, attempt);
      } catch (err) {
        return this.afterFailedAttempt(workspace, err, attempt, strategy.isPermanent(err));
      }
      return this.observeProvision(workspace);
    }
    const { image, server } = workspace;
    if (!image || !server) return this.fail(workspace, 'The workspace has no image or server');
    const host = this.hosts.get(server);
    try {
      await strategy.provision(workspace, { image, server, host }, attempt);
    } catch (err) {
      return this.afterFailedAttempt(workspace, err, attempt, strategy.isPermanent(err), () => this.removeContainers(server, workspace.id));
    }
    return this.observeProvision(workspace);
  }

  /**
   * The provision duration histogram: request (the row's creation) to `running`, by kind: `staged` for a staging
   * pool's workspace, `cold` for one a launch asked for. Only a run that left the workspace running counts.
   */
  private async observeProvision(workspace: Workspace): Promise<void> {
    const now = await rawQuery<{ status: string }>(this.workspaces.manager.connection, 'SELECT status FROM workspaces WHERE id = $1', [workspace.id]).catch(() => []);
    if (now[0]?.status !== 'running') return;
    this.metrics.provisionDuration.observe({ kind: workspace.stagingConfigId ? 'staged' : 'cold' }, Math.max(0, Date.now() - workspace.createdAt.getTime()) / 1000);
  }

  /**
   * A provision attempt that threw: handed back at shutdown (rethrown; the next run decides), failed for good (the
   * workspace fails with the message, `cleanup` removes what was made), or left to the job's retry (message shown).
   */
  private async afterFailedAttempt(workspace: Workspace, err: unknown, attempt: ProvisionAttempt, permanent: boolean, cleanup?: () => Promise<unknown>): Promise<never> {
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

  /** Ends a provision that keeps losing its worker: the workspace fails with the reason, its container goes. */
  async abandonProvision(workspaceId: string, reason: string): Promise<void> {
    const workspace = await this.workspaces.findOne({ where: { id: workspaceId }, relations: { server: true } });
    if (!workspace || workspace.status !== 'starting') return;
    await this.fail(workspace, reason);
    if (workspace.server) await this.removeContainers(workspace.server, workspace.id);
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
      await this.removeContainers(workspace.server, workspace.id);
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

  /**
   * Removes this deployment's containers that no live workspace owns; fails running workspaces whose container vanished.
   * Every enabled server that is up, or only `serverIds` (a host that answers again, reconciled at once). A server
   * marked down is skipped: its workspaces keep their rows until it answers (ServerHealth), and no call waits on it.
   */
  async reconcile(serverIds?: string[]): Promise<{ removed: number; vanished: number }> {
    let removed = 0;
    let vanished = 0;
    const servers = await this.servers.findBy({ enabled: true, health: 'up', ...(serverIds ? { id: In(serverIds) } : {}) });
    for (const server of servers) {
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
        if (isHolder(container)) continue; // the holders' own sweep below
        if (!live.has(container.labels[LABELS.workspaceId] ?? '')) {
          await host.remove(container.id);
          removed++;
        }
      }
      removed += await this.holders.sweep(server, containers);
      const present = new Set(ids);
      for (const w of runningBefore.filter((r) => !present.has(r.id))) {
        if (await this.lifecycle.fail(w.id, 'running', 'The workspace container vanished from its server')) vanished++;
      }
    }
    return { removed, vanished };
  }

  /**
   * Network holders of one server, or of every server that is up (a disabled one's free holders are removed); a host
   * that fails is logged and the rest go on.
   */
  async fillNetworkPools(serverId?: string): Promise<{ made: number; removed: number }> {
    const total = { made: 0, removed: 0 };
    const servers = await this.servers.findBy({ health: 'up', ...(serverId ? { id: serverId } : {}) });
    for (const server of servers) {
      try {
        const done = await this.holders.fill(server);
        total.made += done.made;
        total.removed += done.removed;
      } catch (err) {
        this.logger.warn(`network holders of ${server.hostname}: ${(err as Error).message}`);
      }
    }
    return total;
  }

  /** The workspace's containers by name, then the network holder it joined (nothing is left in its namespace by then). */
  private async removeContainers(server: Server, workspaceId: string): Promise<void> {
    await removeByName(this.hosts.get(server), workspaceId);
    await this.holders.release(workspaceId, server);
  }

  private async progress(workspace: Workspace, percent: number, message: string): Promise<void> {
    await this.lifecycle.progress(workspace.id, percent, message);
  }

  /**
   * The launch failed for good: the workspace fails and its egress connection goes back (a failed workspace uses none;
   * its destroy releases again, idempotently). After the failure's own transaction: nothing can revive a failed row.
   */
  private async fail(workspace: Workspace, message: string): Promise<void> {
    if (await this.lifecycle.fail(workspace.id, 'starting', `Could not start the workspace: ${message}`)) await this.egress.release(workspace.id);
  }
}

/** The workspace's container, then its egress sidecar (whose network namespace the container joined), by name. */
async function removeByName(host: DockerHost, workspaceId: string): Promise<void> {
  await host.remove(containerNameFor(workspaceId));
  await host.remove(egressSidecarNameFor(workspaceId));
}
