import { createHash, randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import {
  ContainerNotFoundError, ContainerSummary, DockerHost, DockerHosts, ensureWorkspaceNetwork, LABELS, parseRunConfig, portsFromAttributes, WORKSPACE_NETWORK, WorkspaceContainerSpec,
} from '@ws/agent';
import { addressList, AppConfig } from '@ws/common';
import { rawQuery } from '@ws/database';
import { ImagesService } from '@ws/images';
import { JobProducer } from '@ws/queue';
import type { Server } from '@ws/servers';
import { LIVE_STATUSES } from '../workspace.entity';

/** A network holder's role (LABELS.role) among the deployment's containers: it has no workspace label, being no one's until claimed. */
const HOLDER_ROLE = 'network-holder';
const HOLDER_KEY_LABEL = 'workspace-server.pool-key';
/** A holder container without a row this old was made by a fill that died before recording it. */
const UNRECORDED_GRACE_MS = 60_000;
const HOLDER_MEMORY = 16 * 1024 ** 2;
/** A fill that found launches starting asks again this much later (about once a second while a burst lasts). */
const DEFERRED_FILL_DELAY_MS = 1000;
/** Holders a claim tries before the launch makes its own network (each one found stopped is removed). */
const MAX_CLAIM_TRIES = 3;

/** What a claimed holder gives the workspace's container: its namespace, and the address and ports it publishes. */
export interface ClaimedHolder {
  containerId: string;
  ip: string | null;
  hostPorts: Record<string, number>;
}

interface HolderRow {
  id: string;
  container_id: string;
  container_ip: string | null;
  host_ports: Record<string, number>;
  workspace_id: string | null;
}

/**
 * Network holders (docs/decisions/workspaces.md, "Network holders"): per server and port set, NETWORK_POOL_SIZE
 * small running containers on the isolated workspace network, each publishing that port set. A launch whose container
 * would join that network with those ports (and sets no hostname or hosts of its own) claims one and joins its
 * network namespace (NetworkMode container:<id>), as a container joins its egress sidecar's: Docker then sets up no
 * veth, address or DNS resolver for it, which is about a third of `docker run` on the isolated network. The row in
 * `network_holders` is the claim (FOR UPDATE SKIP LOCKED, so concurrent launches never share one), found again by a
 * retried launch; teardown removes a workspace's holder after its container; the reconciler sweeps the rest. No free
 * holder: the launch makes its own network as before.
 */
@Injectable()
export class NetworkHolders {
  private readonly logger = new Logger(NetworkHolders.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly hosts: DockerHosts,
    private readonly images: ImagesService,
    private readonly jobs: JobProducer,
  ) {}

  private get image(): string {
    return this.config.NETWORK_POOL_IMAGE || this.config.EGRESS_IMAGE;
  }

  get enabled(): boolean {
    return this.config.NETWORK_POOL_SIZE > 0 && this.image !== '';
  }

  /**
   * The workspace's holder: the one an earlier run of its launch claimed, else a free one of its server and port set
   * (oldest first), else null (no pool for it, or none free). A holder found stopped (its engine restarted, say) is
   * removed and the next one tried, a few at most.
   */
  async claim(workspaceId: string, server: Server, spec: WorkspaceContainerSpec): Promise<ClaimedHolder | null> {
    const key = this.enabled ? poolKeyOf(spec) : null;
    if (!key) return null;
    const host = this.hosts.get(server);
    let [row]: Array<HolderRow | undefined> = await rawQuery<HolderRow>(this.db, 'SELECT * FROM network_holders WHERE workspace_id = $1', [workspaceId]);
    let claimed = false;
    try {
      for (let tries = 0; tries < MAX_CLAIM_TRIES; tries++) {
        if (!row) {
          [row] = await rawQuery<HolderRow>(
            this.db,
            `UPDATE network_holders SET workspace_id = $1, claimed_at = now()
              WHERE id = (SELECT id FROM network_holders WHERE server_id = $2 AND pool_key = $3 AND workspace_id IS NULL ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
              RETURNING *`,
            [workspaceId, server.id, key],
          );
          if (!row) return null;
          claimed = true;
        }
        const running = await host.inspect(row.container_id).then(
          (state) => state.running,
          (err) => {
            if (err instanceof ContainerNotFoundError) return false;
            throw err; // the launch's retry asks again, and finds this claim
          },
        );
        if (running) return { containerId: row.container_id, ip: row.container_ip, hostPorts: row.host_ports };
        await this.drop(host, row);
        row = undefined;
      }
      return null;
    } finally {
      // A holder left the pool, however this ended.
      if (claimed) await this.refillSoon(server.id);
    }
  }

  /**
   * A refill of the server's pool shortly after a claim (deduplicated per second), off the launch's path; asked again
   * by a fill that found launches still starting there.
   */
  private async refillSoon(serverId: string, delay = this.config.STAGING_REFILL_DELAY_MS): Promise<void> {
    // One job per server and second it is due in: asks for the same second are one, a deferred ask is a new one.
    const second = Math.floor((Date.now() + delay) / 1000);
    await this.jobs
      .enqueue('maintenance.fill-network-pools', { serverId }, { jobId: `fill-network-pool-${serverId}-${second}`, delay })
      .catch((err: Error) => this.logger.warn(`network pool refill not enqueued (the schedule will run it): ${err.message}`));
  }

  /** Removes the workspace's holder (after its container: nothing may still be in the namespace) and its row. */
  async release(workspaceId: string, server: Server): Promise<void> {
    const rows = await rawQuery<HolderRow>(this.db, 'SELECT * FROM network_holders WHERE workspace_id = $1', [workspaceId]);
    for (const row of rows) await this.drop(this.hosts.get(server), row);
  }

  /** A holder's container removed, then its row (a row never outlives a holder that may still run). */
  private async drop(host: DockerHost, row: Pick<HolderRow, 'id' | 'container_id'>): Promise<void> {
    await host.remove(row.container_id);
    await rawQuery(this.db, 'DELETE FROM network_holders WHERE id = $1', [row.id]);
  }

  /**
   * Once no launch is starting on the server (else it asks again in a moment), tops up the server's free holders to
   * NETWORK_POOL_SIZE for each port set the enabled images use, and removes
   * free ones beyond it (a smaller size, an image no longer offered). One at a time, counted again before each: a fill
   * runs beside launches on the same host and must not crowd them, and two fills at once overshoot by one at most.
   */
  async fill(server: Server): Promise<{ made: number; removed: number; deferred?: true }> {
    if (server.health !== 'up') return { made: 0, removed: 0 };
    // Holders are for the next launches: made while launches start on the host, they would slow those down.
    if (this.enabled && server.enabled && (await this.launchesStarting(server.id))) {
      await this.refillSoon(server.id, DEFERRED_FILL_DELAY_MS);
      return { made: 0, removed: 0, deferred: true };
    }
    const host = this.hosts.get(server);
    // A disabled server, or the pool off: no port set is kept, and every free holder goes.
    const kept = this.enabled && server.enabled;
    if (!kept && !(await this.hasHolders(server.id))) return { made: 0, removed: 0 }; // no call to a host that may not answer
    const sets = kept ? await this.portSets(server) : new Map<string, Record<string, string>>();
    const size = kept ? this.config.NETWORK_POOL_SIZE : 0;
    let made = 0;
    for (const [key, ports] of sets) {
      for (let i = 0; i < size && (await this.freeCount(server.id, key)) < size; i++) {
        await this.make(host, server, key, ports);
        made++;
      }
    }
    // Taken out of the pool first (a launch may be claiming the others this moment), then removed.
    const surplus = await rawQuery<{ container_id: string }>(
      this.db,
      `DELETE FROM network_holders WHERE workspace_id IS NULL AND id IN (
        SELECT id FROM (SELECT id, pool_key, row_number() OVER (PARTITION BY pool_key ORDER BY created_at) AS n FROM network_holders WHERE server_id = $1 AND workspace_id IS NULL) free
          WHERE NOT (pool_key = ANY($2)) OR n > $3
      ) RETURNING container_id`,
      [server.id, [...sets.keys()], size],
    );
    for (const { container_id } of surplus) await host.remove(container_id);
    return { made, removed: surplus.length };
  }

  /**
   * `server remove`: the server's holders go with it. Their rows are deleted in the removal's transaction (`tx`, under
   * the placement lock), and the returned function removes their containers once it committed; a host that does not
   * answer keeps them (logged).
   */
  async takeAll(server: Server, tx: EntityManager): Promise<() => Promise<void>> {
    // As a SELECT: TypeORM answers a DELETE … RETURNING with [rows, count].
    const rows: Array<{ container_id: string }> = await tx.query(
      'WITH taken AS (DELETE FROM network_holders WHERE server_id = $1 RETURNING container_id) SELECT container_id FROM taken',
      [server.id],
    );
    return async () => {
      const host = this.hosts.get(server);
      for (const { container_id } of rows) {
        await host.remove(container_id).catch((err: Error) => this.logger.warn(`network holder ${container_id.slice(0, 12)} on ${server.hostname} not removed: ${err.message}`));
      }
    };
  }

  private async hasHolders(serverId: string): Promise<boolean> {
    return (await rawQuery(this.db, 'SELECT 1 FROM network_holders WHERE server_id = $1 LIMIT 1', [serverId])).length > 0;
  }

  private async launchesStarting(serverId: string): Promise<boolean> {
    const rows = await rawQuery(this.db, `SELECT 1 FROM workspaces WHERE server_id = $1 AND status = 'starting' LIMIT 1`, [serverId]);
    return rows.length > 0;
  }

  private async freeCount(serverId: string, key: string): Promise<number> {
    const [{ free }] = await rawQuery<{ free: number }>(
      this.db,
      'SELECT count(*)::int AS free FROM network_holders WHERE server_id = $1 AND pool_key = $2 AND workspace_id IS NULL',
      [serverId, key],
    );
    return free;
  }

  /**
   * The reconciler's part, with the containers it listed on the server: removes holders claimed by a workspace that is
   * no longer live, rows whose container is gone, and holder containers no row records (a fill died between making
   * and recording one). Free holders stay.
   */
  async sweep(server: Server, containers: ContainerSummary[]): Promise<number> {
    const host = this.hosts.get(server);
    // Only rows older than the grace can be gone: one made after the listing is not in it, yet runs.
    const rows = await rawQuery<HolderRow & { settled: boolean; abandoned: boolean }>(
      this.db,
      `SELECT h.*, h.created_at < now() - $2 * interval '1 millisecond' AS settled,
              (h.workspace_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = h.workspace_id AND w.status = ANY($3))) AS abandoned
         FROM network_holders h WHERE h.server_id = $1`,
      [server.id, UNRECORDED_GRACE_MS, LIVE_STATUSES],
    );
    const present = new Map(containers.filter(isHolder).map((c) => [c.id, c]));
    let removed = 0;
    for (const row of rows) {
      const gone = row.settled && present.get(row.container_id)?.state !== 'running';
      if (!gone && !row.abandoned) continue;
      await this.drop(host, row);
      removed++;
    }
    const recorded = new Set(rows.map((r) => r.container_id));
    const now = Date.now();
    for (const c of present.values()) {
      if (recorded.has(c.id) || now - c.createdAt.getTime() < UNRECORDED_GRACE_MS) continue;
      await host.remove(c.id);
      removed++;
    }
    return removed;
  }

  private async make(host: DockerHost, server: Server, key: string, ports: Record<string, string>): Promise<void> {
    await ensureWorkspaceNetwork(host);
    const spec: WorkspaceContainerSpec = {
      name: `ws-net-${randomUUID()}`,
      image: this.image,
      entrypoint: ['sleep', 'infinity'],
      cores: 0.1,
      memoryBytes: HOLDER_MEMORY,
      env: {},
      labels: { [LABELS.deploymentId]: this.config.DEPLOYMENT_ID, [LABELS.role]: HOLDER_ROLE, [HOLDER_KEY_LABEL]: key },
      ports,
      publishHost: server.publishHost || '127.0.0.1',
      network: WORKSPACE_NETWORK.name,
      user: '65534',
      capAdd: [],
      pidsLimit: 16,
    };
    const { containerId } = await host.createWorkspaceContainer(spec);
    try {
      await host.start(containerId);
      const state = await host.inspect(containerId, ports);
      if (!state.running || Object.keys(state.hostPorts).length !== Object.keys(ports).length) throw new Error(`network holder ${spec.name} did not start with its ports`);
      await rawQuery(
        this.db,
        'INSERT INTO network_holders (server_id, pool_key, container_id, container_ip, host_ports) VALUES ($1, $2, $3, $4, $5)',
        [server.id, key, containerId, state.ip, JSON.stringify(state.hostPorts)],
      );
    } catch (err) {
      await host.remove(containerId).catch(() => undefined);
      throw err;
    }
  }

  /** Port sets (by pool key) of the enabled container images that would join the isolated network on this server. */
  private async portSets(server: Server): Promise<Map<string, Record<string, string>>> {
    const sets = new Map<string, Record<string, string>>();
    for (const image of await this.images.list()) {
      if (!image.enabled || image.kind !== 'container' || image.restrictToNetwork) continue;
      if (image.restrictToServer && image.serverId !== server.id) continue;
      let run;
      try {
        run = parseRunConfig(image.runConfig, addressList(this.config.WORKSPACE_SECURITY_OPTS_ALLOWED));
      } catch {
        continue; // a launch of it fails on its own; nothing to hold for it
      }
      if (run.hostname || run.extraHosts?.length) continue;
      const ports = portsFromAttributes(image.attributes);
      const key = poolKeyOf({ ports, network: WORKSPACE_NETWORK.name, publishHost: server.publishHost || '127.0.0.1' });
      if (key) sets.set(key, ports);
    }
    return sets;
  }
}

/** A holder container of the pool (claimed or free), as the reconciler lists it. */
export function isHolder(container: Pick<ContainerSummary, 'labels'>): boolean {
  return container.labels[LABELS.role] === HOLDER_ROLE;
}

/**
 * Which holders a container spec can join: same network (only the isolated one is pooled), same published ports on
 * the same address, and nothing of the namespace's own set by the image (hostname, hosts). Null: none can.
 */
export function poolKeyOf(spec: Pick<WorkspaceContainerSpec, 'ports' | 'network' | 'publishHost' | 'hostname' | 'extraHosts' | 'networkContainer'>): string | null {
  if (spec.network !== WORKSPACE_NETWORK.name || spec.hostname || spec.extraHosts?.length || spec.networkContainer) return null;
  const ports = Object.entries(spec.ports).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256').update(JSON.stringify([spec.publishHost || '127.0.0.1', ports])).digest('hex').slice(0, 16);
}
