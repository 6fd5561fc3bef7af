import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { isLockWaitTimeout } from '@ws/database';
import { addSeconds, newId, toWireId } from '@ws/common';
import { Entitlements } from '@ws/licensing';
import { JobProducer, jobId } from '@ws/queue';
import { IssuedToken, SessionToken, SessionTokensService, User, UsersService } from '@ws/users';
import type { Image } from '@ws/images';
import { newWorkspaceFields } from './new-workspace';
import { lockPlacedServer, planPlacement, reserveServer } from './placement';
import { countLiveWorkspaces } from '../reads/staged-workspaces';
import { Workspace } from '../workspace.entity';
import { connectPath, operationalStatus } from '../reads/workspace.mappers';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import { WorkspaceProfiles } from '../profiles/workspace-profiles.service';
import type { IssuedLaunch, LaunchAnswer, LaunchChecks, ResolvedLaunch } from './launch-context';
import type { ReservedRowFields } from './launch-step';
import { LaunchSteps } from './launch-steps';

/** Transactions a launch runs when its waits for the server's or the seat's row lock pass the statement bound. */
const LOCK_WAIT_ATTEMPTS = 3;

/**
 * The end of every launch that no step served: the owner's token (minted here only), the workspace row in one
 * transaction, and the provision job. A launch that ends here without a workspace removes what it made.
 */
@Injectable()
export class LaunchRecorder {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly users: UsersService,
    private readonly tokens: SessionTokensService,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly jobs: JobProducer,
    private readonly entitlements: Entitlements,
    private readonly profiles: WorkspaceProfiles,
    private readonly steps: LaunchSteps,
  ) {}

  /** `checks`: what each step's run found, for its own reserve. */
  async record(resolved: ResolvedLaunch, checks: LaunchChecks): Promise<LaunchAnswer> {
    // The id the token names; the row is recorded next.
    const workspaceId = newId();
    const launch: IssuedLaunch = Object.assign(resolved, { workspaceId, issued: await this.ownerToken(resolved.user, workspaceId) });
    const workspace = await this.placeAndRecord(launch, checks);
    await this.enqueueProvision(launch);
    const { user, issued: { jwt } } = launch;
    return {
      workspace_id: toWireId(workspace.id), session_token: jwt, username: user.username, status: operationalStatus(workspace.status),
      share_id: workspace.shareId, user_id: toWireId(user.id), workspace_url: connectPath(workspace.id, user.id, jwt),
    };
  }

  /**
   * The owner's session token of a workspace, which its links are signed with: minted here for every way a user
   * gets a workspace (a launch, a staged claim, a cast link's resume).
   */
  ownerToken(user: Pick<User, 'id'>, workspaceId: string): Promise<IssuedToken> {
    return this.tokens.createFor(user, { workspace_id: workspaceId });
  }

  /**
   * A staged workspace (no user yet) for a staging refill, inside the refill's transaction: the same seat, server
   * and row as a launch. Throws a launch's refusals (the seat's 409, placement's NoCapacity); enqueue its
   * provision after the commit (enqueueProvisions).
   */
  async recordStaged(tx: EntityManager, pool: { image: Image; zoneId: string; stagingConfigId: string; expirationDate: Date }): Promise<string> {
    const { image, zoneId, stagingConfigId, expirationDate } = pool;
    const server = await reserveServer(tx, image, { zoneId });
    await this.entitlements.reserveSessionCapacity(tx, countLiveWorkspaces);
    const workspace = await this.lifecycle.record(tx, {
      ...newWorkspaceFields({ id: newId(), userId: null, image, serverId: server.id, start: new Date(), expirationDate, operationalMessage: 'Staged: waiting for a worker' }),
      stagingConfigId,
    });
    return workspace.id;
  }

  /** After commit: a lost enqueue leaves a `starting` row that the reaper re-enqueues under the same job id. */
  async enqueueProvisions(workspaceIds: string[]): Promise<void> {
    for (const id of workspaceIds) await this.jobs.enqueue('workspace.provision', { workspaceId: id }, { jobId: jobId.provision(id) });
  }

  /**
   * What a launch that ends with no workspace made goes: the user it created itself (its tokens with it), else
   * the token it issued. Never a user who existed before the launch: deleting one would take its workspaces'
   * owner away (issue 19), so its own workspaces stay its own.
   */
  async discard(launch: ResolvedLaunch | IssuedLaunch): Promise<void> {
    if (launch.createdUser) await this.users.remove(launch.user.id);
    else if ('issued' in launch) await this.db.getRepository(SessionToken).delete({ id: launch.issued.token.id });
  }

  /**
   * Placement is planned before the transaction, with no lock (planPlacement: its refusals come at once). Then one
   * transaction, its locks always in this order (no deadlock between launches and staging, which takes a server
   * then a seat): what the steps reserve (an egress connection; a server session's sealed columns), the chosen
   * server's placement lock only (lockPlacedServer, capacity read again under it; other servers stay free for
   * concurrent launches), a seat under the license's session limit (the seat counter's row, countLiveWorkspaces), then the
   * workspace row (`starting`, event `requested`; the outbox takes no lock). The server and seat locks are taken
   * last, so launches on one server take turns only for the insert and the commit, however slow the steps are.
   * Whether a Docker host is needed is known before (launch.needsDockerHost, the server connection step's
   * decision): a VNC server reached directly needs none.
   */
  private async placeAndRecord(launch: IssuedLaunch, checks: LaunchChecks): Promise<Workspace> {
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.placeAndRecordOnce(launch, checks);
        } catch (err) {
          // Queued for the server's or the seat's row past the statement bound: a burst on a busy host, not an
          // outage. The whole transaction runs again (planned anew); a third such wait answers 503 as an outage would.
          if (!isLockWaitTimeout(err) || attempt >= LOCK_WAIT_ATTEMPTS) throw err;
        }
      }
    } catch (err) {
      // No workspace came of it: the token goes, and so does a user made only for this request.
      await this.discard(launch);
      throw this.profiles.conflictOf(err) ?? err;
    }
  }

  private async placeAndRecordOnce(launch: IssuedLaunch, checks: LaunchChecks): Promise<Workspace> {
    const { request, user, image, settings, workspaceId } = launch;
    const start = new Date();
    const plan = launch.needsDockerHost ? await planPlacement(this.db.manager, image) : null;
    return this.db.transaction(async (tx) => {
      const reserved = await this.reserveSteps(tx, launch, checks);
      // A server image is launched only through @ws/server-sessions' step: a process without that module is a wiring bug.
      if (image.kind === 'server' && !reserved.serverSession) throw new Error(`image ${image.id} is a server image and no server connection step ran (ServerSessionsModule is not loaded)`);
      // Last before the row: the server's and the seat counter's rows are held only for the insert and the commit.
      const server = plan ? await lockPlacedServer(tx, plan) : null;
      await this.entitlements.reserveSessionCapacity(tx, countLiveWorkspaces);
      return this.lifecycle.record(tx, {
        ...newWorkspaceFields({
          id: workspaceId, userId: user.id, image, serverId: server?.id ?? null, start, expirationDate: addSeconds(start, settings.keepaliveExpiration),
          operationalMessage: 'Waiting for a worker',
        }),
        serverConnection: null, serverPasswordEncrypted: null, relaySecret: null, ...reserved.serverSession,
        sharingEnabled: request.enableSharing, environment: { ...request.environment }, sessionTokenId: launch.issued.token.id,
        clientSettingsOverride: { ...request.clientSettingsOverride },
        launchOptions: {
          clientLanguage: request.clientLanguage, clientTimezone: request.clientTimezone, workspaceUrl: request.workspaceUrl, containerNetwork: request.containerNetwork,
          ...reserved.launchOptions,
        },
        persistentProfileMode: null, isPersistentProfile: false, profileLocation: null, ...reserved.profile,
      });
    });
  }

  private async reserveSteps(tx: EntityManager, launch: IssuedLaunch, checks: LaunchChecks): Promise<ReservedRowFields> {
    const reserved: ReservedRowFields = {};
    for (const step of this.steps.list()) {
      if (!step.reserve) continue;
      const fields = await step.reserve(tx, launch, checks.get(step));
      if (fields.launchOptions) reserved.launchOptions = { ...reserved.launchOptions, ...fields.launchOptions };
      if (fields.serverSession) reserved.serverSession = { ...reserved.serverSession, ...fields.serverSession };
      if (fields.profile) reserved.profile = { ...reserved.profile, ...fields.profile };
    }
    return reserved;
  }

  /**
   * After commit. When the queue refuses (Redis down: 503), the workspace is withdrawn before answering, so an
   * integrator who retries gets one workspace, not two; a job that did reach the queue finds the row gone and
   * does nothing. Should the withdrawal fail too, the `starting` row is the reaper's: it re-enqueues it.
   */
  private async enqueueProvision(launch: IssuedLaunch): Promise<void> {
    const id = launch.workspaceId;
    try {
      await this.jobs.enqueue('workspace.provision', { workspaceId: id }, { jobId: jobId.provision(id) });
    } catch (err) {
      await this.withdraw(launch).catch(() => undefined);
      throw err;
    }
  }

  /** A recorded workspace that no worker will ever hear of: removed (no container exists), with its token and the user made for it. */
  private async withdraw(launch: IssuedLaunch): Promise<void> {
    if (await this.lifecycle.stop(launch.workspaceId, 'failed')) await this.lifecycle.destroyed(launch.workspaceId);
    await this.discard(launch);
  }
}
