import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In } from 'typeorm';
import { addSeconds, ApiError, ErrorCode, newId, parseId } from '@ws/common';
import { creationOrder, KeysetList, listPage, PageAnswer, PageRequest, rawQuery } from '@ws/database';
import { DEFAULT_CLIENT_SETTINGS, EffectiveGroupSettings } from '@ws/groups';
import { Image } from '@ws/images';
import { Entitlements } from '@ws/licensing';
import { JobProducer } from '@ws/queue';
import { Server } from '@ws/servers';
import type { User } from '@ws/users';
import {
  bindSessionToken, countReadyStaged, LaunchCommands, LaunchRecorder, pickReadyStaged, unassignedStaged, WorkspaceLifecycle,
  WorkspaceTeardown,
} from '@ws/workspaces';
import type { LaunchRequest } from '@ws/workspaces';
import { Zone } from '@ws/zones';
import type { NewStagingConfig, StagingConfigChanges } from './dto/staging.requests';
import { canServeFromStaging, MATCHING_CONFIGS_SQL, mountsPerUser, pickParameters } from './staging-queries';
import { STAGING_FLAG_NAMES, STAGING_FLAGS, StagingConfig } from './staging-config.entity';
import { StagingConfigView } from './staging.mappers';

const STAGING_CONFIGS_LIST: KeysetList = { name: 'staging_configs', from: 'staging_configs s', keys: creationOrder('s') };

/** What a launch knows when it may take a staged workspace instead of starting one. */
export interface StagedClaimInput {
  user: User;
  image: Image;
  settings: EffectiveGroupSettings;
  request: LaunchRequest;
}

/** A staged workspace now the user's: running, with a session token minted for it. */
export interface StagedClaimResult {
  workspaceId: string;
  shareId: string;
  jwt: string;
}

/**
 * Staging configs (the five operations) and the claim of a staged workspace by request_workspace. Filling,
 * expiring and trimming the pools is the worker's (StagingReconciler); this asks it to run after a change.
 */
@Injectable()
export class StagingService {
  private readonly logger = new Logger(StagingService.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly recorder: LaunchRecorder,
    private readonly teardown: WorkspaceTeardown,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly jobs: JobProducer,
    private readonly launchCommands: LaunchCommands,
    private readonly entitlements: Entitlements,
  ) {}

  /** get_staging_configs: every config in creation order, or one page of them (`limit`, `cursor`). */
  async list(request: PageRequest = {}): Promise<{ rows: StagingConfigView[]; paging: PageAnswer }> {
    const configs = this.db.getRepository(StagingConfig);
    const relations = { zone: true, image: true } as const;
    const { rows, paging } = await listPage(this.db, STAGING_CONFIGS_LIST, request,
      () => configs.find({ relations, order: { createdAt: 'ASC', id: 'ASC' } }), (ids) => configs.find({ where: { id: In(ids) }, relations }));
    return { rows: await this.views(rows), paging };
  }

  async get(stagingConfigId: string): Promise<StagingConfigView> {
    return (await this.views([await this.find(stagingConfigId)]))[0];
  }

  /** Creating and changing pools needs the license's session_staging (403); reading and deleting them never does. */
  async create(fields: NewStagingConfig): Promise<StagingConfigView> {
    await this.entitlements.assertFeature('session_staging', 'Session staging');
    const { zone, image } = await this.checkPlacement(fields.zone_id, fields.image_id);
    const config = this.db.getRepository(StagingConfig).create({
      id: newId(), zoneId: zone.id, imageId: image.id, numSessions: fields.num_sessions, expiration: fields.expiration,
      ...Object.fromEntries(STAGING_FLAG_NAMES.map((name) => [STAGING_FLAGS[name], fields[name] ?? DEFAULT_CLIENT_SETTINGS[name]])),
    });
    await this.db.getRepository(StagingConfig).save(config);
    await this.requestReconcile(config.id);
    return this.get(config.id);
  }

  async update(changes: StagingConfigChanges): Promise<StagingConfigView> {
    await this.entitlements.assertFeature('session_staging', 'Session staging');
    const config = await this.find(changes.staging_config_id);
    const { zone, image } = await this.checkPlacement(changes.zone_id ?? config.zoneId, changes.image_id ?? config.imageId);
    const set: Omit<Partial<StagingConfig>, 'zone' | 'image'> = { zoneId: zone.id, imageId: image.id };
    if (changes.num_sessions !== undefined) set.numSessions = changes.num_sessions;
    if (changes.expiration !== undefined) set.expiration = changes.expiration;
    for (const name of STAGING_FLAG_NAMES) {
      const value = changes[name];
      if (value !== undefined) Object.assign(set, { [STAGING_FLAGS[name]]: value });
    }
    await this.db.getRepository(StagingConfig).update({ id: config.id }, set);
    await this.requestReconcile(config.id);
    return this.get(config.id);
  }

  /** The config goes at once; its unassigned staged workspaces are removed now (the reconciler catches any left). */
  async delete(stagingConfigId: string): Promise<void> {
    const config = await this.find(stagingConfigId);
    await this.db.getRepository(StagingConfig).delete({ id: config.id });
    for (const id of await unassignedStaged(this.db.manager, config.id)) await this.teardown.destroy(id, 'orphaned');
  }

  /**
   * request_workspace's claim step: the oldest running staged workspace of a matching config becomes the
   * user's, in one transaction: a SKIP LOCKED pick (concurrent requests on any replica never share one) and
   * the lifecycle owner's `assign` (owner, sharing, keepalive and expiry from the user's group, and the
   * `assigned` event whose subscriber refills the pool). Then the session token and the image's go command.
   * Claims reserve no seat (a staged workspace is counted from its staging) and need no session_staging: a pool
   * left from a lapsed license is handed out until it is empty.
   */
  async claim({ user, image, settings, request }: StagedClaimInput): Promise<StagedClaimResult | null> {
    if (!canServeFromStaging(image, request)) return null;
    // The pools that may serve it, read before any transaction: a launch with none (most on-demand launches)
    // costs one statement here instead of a transaction around it.
    const matching = await rawQuery<{ id: string }>(this.db, MATCHING_CONFIGS_SQL, pickParameters(image.id, settings));
    if (matching.length === 0) return null;
    const claimed = await this.db.transaction(async (tx) => {
      const picked = await pickReadyStaged(tx, image.id, matching.map((c) => c.id));
      if (!picked) return null;
      const at = new Date();
      const assigned = await this.lifecycle.assign(picked.id, {
        userId: user.id, sharingEnabled: request.enableSharing, startDate: at, keepaliveDate: at, expirationDate: addSeconds(at, settings.keepaliveExpiration),
        launchOptions: { clientLanguage: request.clientLanguage, clientTimezone: request.clientTimezone, workspaceUrl: request.workspaceUrl }, operationalMessage: 'Running',
      }, tx);
      return assigned ? picked : null;
    });
    if (!claimed) return null;
    try {
      const issued = await this.recorder.ownerToken(user, claimed.id);
      await bindSessionToken(this.db.manager, claimed.id, issued.token.id);
      // The image's go command, now that the desktop has its user; a browser image gets the request's page as
      // WORKSPACE_URL here (its container started before the request). Not awaited: the answer is `running`
      // already, and a failing command shows in operational_message.
      void this.launchCommands.runGoCommand(claimed.id, image.isBrowser && request.workspaceUrl ? { WORKSPACE_URL: request.workspaceUrl } : {});
      return { workspaceId: claimed.id, shareId: claimed.shareId, jwt: issued.jwt };
    } catch (err) {
      // Assigned but no link could be made: it is the user's now, so it goes rather than back to the pool.
      await this.teardown.destroy(claimed.id, 'failed').catch(() => undefined);
      throw err;
    }
  }

  /** Asks the worker to fill, trim or expire this config's pool now; its schedule is the backstop for a lost ask. */
  private async requestReconcile(stagingConfigId: string): Promise<void> {
    await this.jobs.enqueue('staging.reconcile', { stagingConfigId }).catch((err: Error) => this.logger.warn(`staging reconcile not enqueued (the schedule will run it): ${err.message}`));
  }

  private async find(stagingConfigId: string): Promise<StagingConfig> {
    const id = parseId(stagingConfigId);
    const config = id ? await this.db.getRepository(StagingConfig).findOne({ where: { id }, relations: { zone: true, image: true } }) : null;
    if (!config) throw ApiError.invalidId('staging_config_id', stagingConfigId);
    return config;
  }

  /** The zone and image exist, and the image may run in the zone; a refusal names the field. */
  private async checkPlacement(zoneRef: string, imageRef: string): Promise<{ zone: Zone; image: Image }> {
    const fields = { zone: 'zone_id', image: 'image_id' };
    const zoneId = parseId(zoneRef);
    const zone = zoneId ? await this.db.getRepository(Zone).findOneBy({ id: zoneId }) : null;
    if (!zone) throw ApiError.invalidId(fields.zone, zoneRef);
    const imageId = parseId(imageRef);
    const image = imageId ? await this.db.getRepository(Image).findOneBy({ id: imageId }) : null;
    if (!image) throw ApiError.invalidId(fields.image, imageRef);
    if (image.kind === 'server') {
      throw new ApiError(ErrorCode.InvalidRequest, `${fields.image}: image ${image.friendlyName} reaches an existing server; only container images are staged`);
    }
    if (image.restrictToZone && image.zoneId !== zone.id) {
      throw new ApiError(ErrorCode.InvalidRequest, `${fields.image}: image ${image.friendlyName} is restricted to another zone than ${zone.name}`);
    }
    if (mountsPerUser(image)) {
      throw new ApiError(ErrorCode.InvalidRequest, `${fields.image}: image ${image.friendlyName} mounts per-user volumes ({username} or {user_id}), which a staged workspace cannot have before its user`);
    }
    if (image.restrictToServer && image.serverId) {
      const server = await this.db.getRepository(Server).findOneBy({ id: image.serverId });
      if (server && server.zoneId !== zone.id) throw new ApiError(ErrorCode.InvalidRequest, `${fields.image}: image ${image.friendlyName} is restricted to server ${server.hostname}, outside zone ${zone.name}`);
    }
    return { zone, image };
  }

  private async views(configs: StagingConfig[]): Promise<StagingConfigView[]> {
    const ready = await countReadyStaged(this.db.manager, configs.map((c) => c.id));
    return configs.map((config) => ({
      config, zoneName: config.zone?.name ?? '', imageFriendlyName: config.image?.friendlyName ?? '', numCurrentSessions: ready.get(config.id) ?? 0,
    }));
  }
}
