import { Injectable } from '@nestjs/common';
import { IdempotencyKeys } from '@ws/auth';
import { JobHandler, JobPayloads } from '@ws/queue';
import { ServerHealth } from '@ws/servers';
import { LoginLinksService, SessionTokensService } from '@ws/users';
import { AnonymousUsers, EgressTunnelHealth, WorkspaceRuntime } from '@ws/workspaces';

@Injectable()
export class MaintenanceProcessor {
  constructor(
    private readonly tokens: SessionTokensService,
    private readonly loginLinks: LoginLinksService,
    private readonly runtime: WorkspaceRuntime,
    private readonly anonymousUsers: AnonymousUsers,
    private readonly idempotencyKeys: IdempotencyKeys,
    private readonly egressTunnels: EgressTunnelHealth,
    private readonly health: ServerHealth,
  ) {}

  @JobHandler('maintenance.purge-expired-credentials')
  async purgeExpiredCredentials() {
    return {
      sessionTokens: await this.tokens.purgeExpired(), loginLinks: await this.loginLinks.purgeExpired(),
      // The safety net of the `destroyed` event's removal (AnonymousUsers): anonymous users nothing holds any more.
      anonymousUsers: await this.anonymousUsers.sweep(),
    };
  }

  @JobHandler('maintenance.reap-expired-workspaces')
  reapExpiredWorkspaces() {
    return this.runtime.reap();
  }

  @JobHandler('maintenance.reconcile-containers')
  reconcileContainers() {
    return this.runtime.reconcile();
  }

  @JobHandler('maintenance.fill-network-pools')
  fillNetworkPools(payload: JobPayloads['maintenance.fill-network-pools']) {
    return this.runtime.fillNetworkPools(payload.serverId);
  }

  /** A host that answers again is reconciled at once: orphans removed, vanished containers reported. */
  @JobHandler('maintenance.check-server-health')
  async checkServerHealth() {
    const round = await this.health.checkAll();
    const reconciled = round.recovered.length ? await this.runtime.reconcile(round.recovered.map((s) => s.id)) : null;
    return { checked: round.checked, down: round.down, recovered: round.recovered.map((s) => s.hostname), reconciled };
  }

  @JobHandler('maintenance.expire-idempotency-keys')
  async expireIdempotencyKeys() {
    return { removed: await this.idempotencyKeys.expire() };
  }

  @JobHandler('maintenance.check-egress-tunnels')
  checkEgressTunnels() {
    return this.egressTunnels.check();
  }
}
