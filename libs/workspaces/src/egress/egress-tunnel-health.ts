import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In } from 'typeorm';
import { ContainerNotFoundError, DockerHosts, egressSidecarNameFor } from '@ws/agent';
import { EgressConnection } from '@ws/egress';
import { Server } from '@ws/servers';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import { Workspace } from '../workspace.entity';

/** Running workspaces with a sidecar looked at per pass, oldest first; the next pass (10 s later) sees the rest. */
const MAX_PER_PASS = 500;
/** What a running workspace's status says once its tunnel is back (the `running` transition's own message). */
const RUNNING_MESSAGE = 'Running';
export const tunnelDownMessage = (gatewayName: string) =>
  `The egress tunnel to the gateway ${gatewayName} is down; the sidecar is reconnecting (the workspace reaches nothing meanwhile)`;

/**
 * Egress tunnels of running workspaces (docs/decisions/egress.md, "Tunnel drops after launch"): the sidecar restarts
 * its tunnel by itself and its Docker health check says whether /run/egress/status is `up`; this pass (the worker's
 * `maintenance.check-egress-tunnels`, every 10 s) reads that health with one container inspect per workspace and
 * puts it in the workspace's operational_message through WorkspaceLifecycle: the tunnel-down message while the
 * sidecar is unhealthy, `Running` again once it is healthy. The status stays `running` (the kill switch keeps
 * the workspace's traffic in; a drop is not a failure).
 */
@Injectable()
export class EgressTunnelHealth {
  private readonly logger = new Logger(EgressTunnelHealth.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly hosts: DockerHosts,
    private readonly lifecycle: WorkspaceLifecycle,
  ) {}

  async check(): Promise<{ checked: number; down: number; changed: number }> {
    const running = await this.db.getRepository(Workspace)
      .createQueryBuilder('w')
      .select(['w.id', 'w.serverId', 'w.operationalMessage'])
      .where(`w.status = 'running' AND w.server_id IS NOT NULL AND w.launch_options->>'egressGatewayId' IS NOT NULL`)
      .orderBy('w.updated_at', 'ASC')
      .limit(MAX_PER_PASS)
      .getMany();
    if (running.length === 0) return { checked: 0, down: 0, changed: 0 };
    const connections = await this.db.getRepository(EgressConnection).find({ where: { workspaceId: In(running.map((w) => w.id)) }, relations: { gateway: true } });
    const gatewayOf = new Map(connections.map((c) => [c.workspaceId, c.gateway?.name ?? 'that was deleted']));
    const servers = new Map((await this.db.getRepository(Server).findBy({ id: In([...new Set(running.map((w) => w.serverId as string))]) })).map((s) => [s.id, s]));
    let down = 0;
    let changed = 0;
    for (const workspace of running) {
      const server = servers.get(workspace.serverId as string);
      if (!server) continue;
      let health: string | null;
      try {
        health = (await this.hosts.get(server).inspect(egressSidecarNameFor(workspace.id))).health;
      } catch (err) {
        // A vanished sidecar takes the workspace's network with it: the reconciler's business, not this note's.
        if (!(err instanceof ContainerNotFoundError)) this.logger.warn(`egress tunnel check: server ${server.hostname} did not answer: ${(err as Error).message}`);
        continue;
      }
      const message = tunnelDownMessage(gatewayOf.get(workspace.id) ?? 'that was deleted');
      if (health === 'unhealthy') {
        down++;
        if (workspace.operationalMessage !== message && (await this.lifecycle.runningNote(workspace.id, message))) changed++;
      } else if (health === 'healthy' && workspace.operationalMessage === message) {
        if (await this.lifecycle.runningNote(workspace.id, RUNNING_MESSAGE, message)) changed++;
      }
    }
    return { checked: running.length, down, changed };
  }
}
