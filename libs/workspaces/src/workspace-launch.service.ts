import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryFailedError } from 'typeorm';
import { addSeconds, ApiError, ErrorCode, newId, randomSecret, toWireId } from '@ws/common';
import type { EffectiveGroupSettings } from '@ws/groups';
import { Image, ImagesService } from '@ws/images';
import { GroupsService } from '@ws/groups';
import { Entitlements } from '@ws/licensing';
import { JobProducer, jobId } from '@ws/queue';
import { SessionToken, IssuedToken, SessionTokensService, UserAttributes, User, UsersService } from '@ws/users';
import type { RequestWorkspaceRequest } from './dto/workspace.requests';
import { reserveServer } from './placement';
import { StagedClaimSlot } from './staged-claim';
import { countLiveWorkspaces } from './staged-workspaces';
import { Workspace, WorkspaceServerConnection } from './workspace.entity';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';
import { connectPath, operationalStatus } from './workspace.mappers';
import { WorkspaceEgress } from './workspace-egress.service';
import { WorkspaceLifecycle } from './workspace-lifecycle.service';
import { WorkspaceProfiles } from './workspace-profiles.service';
import { WorkspaceSettings } from './workspace-settings.service';

const FOREIGN_KEY_VIOLATION = '23503';

/** request_workspace's answer. */
export interface LaunchAnswer {
  workspace_id: string;
  session_token: string;
  username: string;
  status: string;
  share_id: string;
  user_id: string;
  workspace_url: string;
}

/** Inputs of a launch that are not the integrator's to set (a cast link's rules). */
export interface LaunchInputs {
  /** Client settings that override the user's groups' for this workspace (enforce_client_settings of a cast link). */
  clientSettingsOverride?: Record<string, boolean>;
  /** The Docker network the container joins (a cast visitor's choice among the image's selectable_networks). */
  containerNetwork?: string;
}

/** What the steps of one launch learn, in order; a step reads what the steps before it set. */
export interface LaunchContext {
  readonly request: RequestWorkspaceRequest;
  readonly inputs: LaunchInputs;
  user?: User;
  /**
   * True when "resolve user" made the user (anonymous, for this request). Only such a user goes when the launch
   * fails: a user who existed before it (an earlier anonymous one included) keeps its workspaces (issue 19).
   */
  createdUser?: boolean;
  settings?: EffectiveGroupSettings;
  image?: Image;
  /** The persistent profile's location when the workspace loads and saves one (modes Enabled and Reset), else null. */
  profileLocation?: string | null;
  /** A server image's connection (issue 14) and its plaintext password, until "place and record" seals it to the workspace. */
  serverSession?: { connection: WorkspaceServerConnection; password: string } | null;
  /** The user's groups (ids), for an egress credential attached to one of them; set by the egress step when asked. */
  groupIds?: string[];
  issued?: IssuedToken;
  workspace?: Workspace;
  /** Set by a step that serves the request itself (a staged workspace claimed): the steps after it do not run. */
  answer?: LaunchAnswer;
}

/** One named step of the launch. Areas that extend the launch (egress, profiles) add a step to LAUNCH_STEPS' order. */
export interface LaunchStep {
  readonly name: string;
  run(launch: LaunchContext): Promise<void>;
}

/** The value an earlier step must have set; a missing one is a bug in the step order, not bad input. */
function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`launch: ${what} is not known yet (step order)`);
  return value;
}

/**
 * request_workspace as a short pipeline of named steps (libs/workspaces/README.md):
 * resolve user → effective settings → image → limits → server connection → persistent profile → egress → claim
 * staged → token → place and record → enqueue provision. Slow work (the container) is the worker's; this decides and records.
 */
@Injectable()
export class WorkspaceLaunch {
  readonly steps: readonly LaunchStep[];

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly users: UsersService,
    private readonly images: ImagesService,
    private readonly tokens: SessionTokensService,
    private readonly settings: WorkspaceSettings,
    private readonly stagedClaim: StagedClaimSlot,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly jobs: JobProducer,
    private readonly profiles: WorkspaceProfiles,
    private readonly entitlements: Entitlements,
    private readonly egress: WorkspaceEgress,
    private readonly groups: GroupsService,
    private readonly serverSessions: WorkspaceServerSessions,
  ) {
    this.steps = [
      { name: 'resolve user', run: (l) => this.resolveUser(l) },
      { name: 'effective settings', run: (l) => this.effectiveSettings(l) },
      { name: 'image', run: (l) => this.resolveImage(l) },
      { name: 'limits', run: (l) => this.checkLimits(l) },
      { name: 'server connection', run: (l) => this.serverConnection(l) },
      { name: 'persistent profile', run: (l) => this.persistentProfile(l) },
      { name: 'egress', run: (l) => this.checkEgress(l) },
      { name: 'claim staged', run: (l) => this.claimStaged(l) },
      { name: 'token', run: (l) => this.issueToken(l) },
      { name: 'place and record', run: (l) => this.placeAndRecord(l) },
      { name: 'enqueue provision', run: (l) => this.enqueueProvision(l) },
    ];
  }

  async request(request: RequestWorkspaceRequest, inputs: LaunchInputs = {}): Promise<LaunchAnswer> {
    const launch: LaunchContext = { request, inputs };
    let step: LaunchStep | undefined;
    try {
      for (step of this.steps) {
        await step.run(launch);
        if (launch.answer) return launch.answer;
      }
    } catch (err) {
      // Refused before anything was recorded: what this launch made goes ("place and record" and the withdrawal
      // clean up after themselves; a staged claim that failed ends its workspace itself).
      if (step && this.steps.indexOf(step) < this.steps.findIndex((s) => s.name === 'place and record')) await this.discard(launch).catch(() => undefined);
      throw userGone(err, request) ?? err;
    }
    const user = need(launch.user, 'user');
    const workspace = need(launch.workspace, 'workspace');
    const jwt = need(launch.issued, 'token').jwt;
    return {
      workspace_id: toWireId(workspace.id), session_token: jwt, username: user.username, status: operationalStatus(workspace.status),
      share_id: workspace.shareId, user_id: toWireId(user.id), workspace_url: connectPath(workspace.id, user.id, jwt),
    };
  }

  /** The request's user, loaded once for the whole launch, or a new anonymous one. */
  private async resolveUser(launch: LaunchContext): Promise<void> {
    const { user_id: userId } = launch.request;
    if (userId !== undefined) {
      launch.user = await this.users.findActive(userId);
      return;
    }
    launch.user = await this.users.createAnonymous();
    launch.createdUser = true;
  }

  /** The user's group settings; a launch's client-settings override wins (staged match and sharing limit included). */
  private async effectiveSettings(launch: LaunchContext): Promise<void> {
    const settings = await this.settings.of(need(launch.user, 'user').id);
    const override = launch.inputs.clientSettingsOverride ?? {};
    launch.settings = { ...settings, clientSettings: { ...settings.clientSettings, ...override } };
  }

  /** image_id, else the user's default image, else their groups'. */
  private async resolveImage(launch: LaunchContext): Promise<void> {
    const { image_id: imageId } = launch.request;
    if (imageId !== undefined) {
      launch.image = await this.images.find(imageId);
      return;
    }
    const attributes = await this.db.getRepository(UserAttributes).findOneByOrFail({ userId: need(launch.user, 'user').id });
    const fallback = attributes.defaultImageId ?? need(launch.settings, 'settings').defaultImageId;
    if (!fallback) throw new ApiError(ErrorCode.InvalidRequest, 'image_id is required: the user and their groups have no default image');
    launch.image = await this.images.find(fallback);
  }

  /** What the image, the user's settings and the license allow (the session limit is held in "place and record"). */
  private async checkLimits(launch: LaunchContext): Promise<void> {
    const image = need(launch.image, 'image');
    if (!image.enabled) throw new ApiError(ErrorCode.InvalidRequest, `Image (${toWireId(image.id)}) is disabled`);
    if (image.restrictToNetwork) {
      // The image's network wins over a cast visitor's choice; a different choice is refused, never ignored.
      if (!image.networkName) throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is restricted to a network but names none (network_name)`);
      const chosen = launch.inputs.containerNetwork;
      if (chosen && chosen !== image.networkName) {
        throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is restricted to the network ${image.networkName}; container_network ${chosen} is not allowed`);
      }
    }
    if (launch.request.enable_sharing) {
      await this.entitlements.assertFeature('session_sharing', 'Workspace sharing');
      if (!need(launch.settings, 'settings').clientSettings.allow_workspace_sharing) {
        throw new ApiError(ErrorCode.Forbidden, 'Sharing is not allowed for this user (client setting allow_workspace_sharing)');
      }
    }
  }

  /**
   * egress_gateway_id: the gateway exists and the user may use it (a credential of its provider on the user, one
   * of their groups or the image), checked before anything is recorded (400, 403, 409). The connection itself is
   * reserved in "place and record". A staged workspace never serves such a request (its container already started).
   */
  private async checkEgress(launch: LaunchContext): Promise<void> {
    const gatewayId = launch.request.egress_gateway_id;
    if (!gatewayId) return;
    const user = need(launch.user, 'user');
    launch.groupIds = ((await this.groups.groupsOf([user.id])).get(user.id) ?? []).map((g) => g.id);
    await this.egress.check({ workspaceId: newId(), userId: user.id, groupIds: launch.groupIds, imageId: need(launch.image, 'image').id, gatewayId });
  }

  /**
   * A server image's connection (WorkspaceServerSessions.resolve: connection_info and rdp_client_type, each a clear
   * 400); a container image takes neither. A server workspace never comes from staging and joins no egress gateway.
   */
  private async serverConnection(launch: LaunchContext): Promise<void> {
    const { request } = launch;
    const image = need(launch.image, 'image');
    if (image.kind !== 'server') {
      if (request.connection_info) throw new ApiError(ErrorCode.InvalidRequest, 'connection_info applies to RDP, VNC and SSH server images, not to container images');
      if (request.rdp_client_type) throw new ApiError(ErrorCode.InvalidRequest, 'rdp_client_type applies to RDP server images, not to container images');
      launch.serverSession = null;
      return;
    }
    // What only a container of the user's own takes is refused, never ignored.
    const containerOnly = [
      ['egress_gateway_id', request.egress_gateway_id], ['environment', request.environment && Object.keys(request.environment).length > 0 ? request.environment : undefined],
      ['container_network', launch.inputs.containerNetwork],
    ].find(([, value]) => value);
    if (containerOnly) throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is a server image; ${containerOnly[0]} applies to container images`);
    launch.serverSession = await this.serverSessions.resolve(image, request, need(launch.user, 'user').username);
  }

  /** Whether the workspace uses a persistent profile, and where (WorkspaceProfiles.decide: 403, 400, 409). */
  private async persistentProfile(launch: LaunchContext): Promise<void> {
    // A server workspace has no home of the user's: its bridge is ours, and the provision never loads a profile into it.
    if (launch.serverSession) {
      launch.profileLocation = null;
      return;
    }
    launch.profileLocation = await this.profiles.decide({
      user: need(launch.user, 'user'), image: need(launch.image, 'image'), settings: need(launch.settings, 'settings'), mode: launch.request.persistent_profile_mode,
    });
  }

  /** The staging area's slot (StagedClaimSlot): a matching staged workspace is handed over already running. */
  private async claimStaged(launch: LaunchContext): Promise<void> {
    if (launch.inputs.containerNetwork) return; // a staged container already joined its network
    if (launch.serverSession) return; // staging starts containers of container images only
    const user = need(launch.user, 'user');
    const staged = await this.stagedClaim.claim({ user, image: need(launch.image, 'image'), settings: need(launch.settings, 'settings'), request: launch.request });
    if (!staged) return;
    const override = launch.inputs.clientSettingsOverride;
    if (override && Object.keys(override).length > 0) {
      await this.db.query('UPDATE workspaces SET client_settings_override = $1 WHERE id = $2', [JSON.stringify(override), staged.workspaceId]);
    }
    launch.answer = {
      workspace_id: toWireId(staged.workspaceId), session_token: staged.jwt, username: user.username, status: 'running', share_id: staged.shareId,
      user_id: toWireId(user.id), workspace_url: connectPath(staged.workspaceId, user.id, staged.jwt),
    };
  }

  /** The owner's session token the new workspace's links are signed with. */
  private async issueToken(launch: LaunchContext): Promise<void> {
    launch.workspace = { id: newId() } as Workspace; // the id the token names; the row is recorded next
    launch.issued = await this.tokens.createFor(need(launch.user, 'user'), { workspace_id: launch.workspace.id });
  }

  /**
   * One transaction, its locks always in this order (no deadlock between launches, staging and the outbox): a
   * seat under the license's session limit (a deployment-wide advisory lock: keep this transaction short), a
   * server with room, the egress connection when asked, then the workspace row (`starting`, event `requested`).
   */
  private async placeAndRecord(launch: LaunchContext): Promise<void> {
    const { request: body } = launch;
    const user = need(launch.user, 'user');
    const image = need(launch.image, 'image');
    const settings = need(launch.settings, 'settings');
    const issued = need(launch.issued, 'token');
    const workspaceId = need(launch.workspace, 'workspace id').id;
    const start = new Date();
    const profile = image.persistentProfilePath && !launch.serverSession && body.persistent_profile_mode !== undefined ? body.persistent_profile_mode : null;
    try {
      launch.workspace = await this.db.transaction(async (tx) => {
        await this.entitlements.reserveSessionCapacity(tx, countLiveWorkspaces);
        const serverSession = need(launch.serverSession, 'server connection');
        // A VNC server is reached directly: no container, so no Docker host and none of its room.
        const server = serverSession?.connection.mode === 'direct' ? null : await reserveServer(tx, image);
        const egress = body.egress_gateway_id
          ? await this.egress.reserve(tx, { workspaceId, userId: user.id, groupIds: launch.groupIds ?? [], imageId: image.id, gatewayId: body.egress_gateway_id })
          : null;
        return this.lifecycle.record(tx, {
          id: workspaceId, userId: user.id, imageId: image.id, serverId: server?.id ?? null,
          serverConnection: serverSession?.connection ?? null, serverPasswordEncrypted: serverSession ? this.serverSessions.seal(serverSession.password, workspaceId) : null,
          relaySecret: serverSession?.connection.mode === 'relay' ? randomSecret(32) : null, operationalMessage: 'Waiting for a worker', operationalProgress: 0,
          containerId: null, containerIp: null, hostPorts: {}, cores: image.cores, memory: image.memory, token: randomSecret(32), viewOnlyToken: randomSecret(32),
          shareId: randomSecret(16), sharingEnabled: body.enable_sharing ?? false, environment: body.environment ?? {}, sessionTokenId: issued.token.id,
          clientSettingsOverride: launch.inputs.clientSettingsOverride ?? {},
          launchOptions: {
            clientLanguage: body.client_language, clientTimezone: body.client_timezone, workspaceUrl: body.workspace_url, containerNetwork: launch.inputs.containerNetwork,
            ...(egress ? { egressGatewayId: egress.gateway.id } : {}),
          },
          persistentProfileMode: profile, isPersistentProfile: profile !== null && profile !== 'Disabled', profileLocation: launch.profileLocation ?? null,
          startDate: start, keepaliveDate: start, expirationDate: addSeconds(start, settings.keepaliveExpiration), destroyedAt: null, destroyReason: null,
        });
      });
    } catch (err) {
      // No workspace came of it: the token goes, and so does a user made only for this request.
      await this.discard(launch);
      throw this.profiles.conflictOf(err) ?? err;
    }
  }

  /**
   * After commit. When the queue refuses (Redis down: 503), the workspace is withdrawn before answering, so an
   * integrator who retries gets one workspace, not two; a job that did reach the queue finds the row gone and
   * does nothing. Should the withdrawal fail too, the `starting` row is the reaper's: it re-enqueues it.
   */
  private async enqueueProvision(launch: LaunchContext): Promise<void> {
    const { id } = need(launch.workspace, 'workspace');
    try {
      await this.jobs.enqueue('workspace.provision', { workspaceId: id }, { jobId: jobId.provision(id) });
    } catch (err) {
      await this.withdraw(launch).catch(() => undefined);
      throw err;
    }
  }

  /** A recorded workspace that no worker will ever hear of: removed (no container exists), with its token and the user made for it. */
  private async withdraw(launch: LaunchContext): Promise<void> {
    const { id } = need(launch.workspace, 'workspace');
    if (await this.lifecycle.stop(id, 'failed')) await this.lifecycle.destroyed(id);
    await this.discard(launch);
  }

  /**
   * What a launch that ends with no workspace made goes: the user it created itself (its tokens with it), else
   * the token it issued. Never a user who existed before the launch: deleting one would take its workspaces'
   * owner away (issue 19), so its own workspaces stay its own.
   */
  private async discard(launch: LaunchContext): Promise<void> {
    if (launch.createdUser && launch.user) await this.users.remove(launch.user.id);
    else if (launch.issued) await this.db.getRepository(SessionToken).delete({ id: launch.issued.token.id });
  }
}

/**
 * The request's user was deleted while the launch ran (an anonymous user removed with its last workspace, or
 * delete_user): the token or the workspace row then refers to no user. The same answer as an unknown user_id.
 */
function userGone(err: unknown, request: RequestWorkspaceRequest): ApiError | null {
  const driver = err instanceof QueryFailedError ? (err.driverError as { code?: string; detail?: string }) : null;
  if (driver?.code !== FOREIGN_KEY_VIOLATION || !/table "users"/.test(driver.detail ?? '') || request.user_id === undefined) return null;
  return ApiError.invalidId('user_id', request.user_id);
}
