import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { addSeconds, ApiError, ErrorCode } from '@ws/common';
import { Image } from '@ws/images';
import { Entitlements } from '@ws/licensing';
import { Metrics } from '@ws/metrics';
import type { DestroyReason } from '@ws/queue';
import { LaunchRecorder, liveUnassignedStaged, StagedRow, stagedPool, WorkspaceTeardown } from '@ws/workspaces';
import { StagingConfig } from './staging-config.entity';
import { mountsPerUser } from './staging-queries';

export interface ReconcileOutcome {
  created: number;
  destroyed: number;
}

/**
 * Why a staged workspace no longer belongs to its pool (failed, expired, or its config gone or changed to another
 * image or zone), or null while it does.
 */
export function staleReason(row: StagedRow, config: Pick<StagingConfig, 'imageId' | 'zoneId'> | undefined): DestroyReason | null {
  if (row.status === 'failed') return 'failed';
  if (row.expired) return 'expired';
  if (!config || config.imageId !== row.imageId || config.zoneId !== row.zoneId) return 'orphaned';
  return null;
}

/**
 * Keeps each staging config's pool at num_sessions unassigned staged workspaces: removes stale ones (above),
 * trims a surplus (starting ones first, then the youngest), and records and provisions the missing ones in
 * the config's zone (through the lifecycle owner: each gets its `requested` event). Runs on the worker: after
 * a config change, on the events of staged workspaces (StagingReplenisher), and on a schedule
 * (expiry, lost asks). Safe to repeat and to run on several workers at once (the config row is locked while
 * its pool is counted and changed).
 *
 * Licensing: staged workspaces count toward the session limit, each reserved (Entitlements.reserveSessionCapacity)
 * in the transaction that records it. A refusal is not a failure: the pool stays short and the next run tries
 * again. Without the session_staging feature nothing new is staged; existing pools drain (claims, expiry).
 */
@Injectable()
export class StagingReconciler {
  private readonly logger = new Logger(StagingReconciler.name);
  /** Why each config's pool was last left short by the license, so it is logged once, not on every run. */
  private readonly shortBy = new Map<string, 'feature' | 'limit'>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly teardown: WorkspaceTeardown,
    private readonly recorder: LaunchRecorder,
    private readonly entitlements: Entitlements,
    private readonly metrics: Metrics,
  ) {}

  /** One config's pool, or every pool when no id is given. */
  async reconcile(stagingConfigId?: string): Promise<ReconcileOutcome> {
    const outcome: ReconcileOutcome = { created: 0, destroyed: 0 };
    const configs = new Map((await this.db.getRepository(StagingConfig).find({
      select: { id: true, imageId: true, zoneId: true }, ...(stagingConfigId ? { where: { id: stagingConfigId } } : {}),
    })).map((c) => [c.id, c]));
    for (const row of await liveUnassignedStaged(this.db.manager, stagingConfigId ?? null)) {
      const reason = staleReason(row, configs.get(row.stagingConfigId));
      if (!reason) continue;
      await this.teardown.destroy(row.id, reason);
      if (reason === 'failed') this.metrics.stagedFailed.inc();
      outcome.destroyed++;
    }
    const ids = stagingConfigId ? [stagingConfigId] : [...configs.keys()];
    for (const id of ids) {
      const one = await this.reconcileConfig(id);
      outcome.created += one.created;
      outcome.destroyed += one.destroyed;
    }
    return outcome;
  }

  private async reconcileConfig(stagingConfigId: string): Promise<ReconcileOutcome> {
    const created: string[] = [];
    let destroyed = 0;
    // Read before the transaction: no second pool connection is waited for while the config row is locked.
    const licensed = (await this.entitlements.features()).session_staging;
    await this.db.transaction(async (tx) => {
      const config = await tx.getRepository(StagingConfig).createQueryBuilder('c').setLock('pessimistic_write').where('c.id = :id', { id: stagingConfigId }).getOne();
      if (!config) return;
      const pool = await stagedPool(tx, config.id);
      const surplus = pool.length - config.numSessions;
      // Starting ones first (they hold no ready desktop yet), then the youngest running ones.
      const toRemove = surplus > 0 ? pool.slice(0, surplus) : [];
      for (const id of toRemove) await this.teardown.destroy(id, 'orphaned');
      destroyed = toRemove.length;
      const image = await tx.getRepository(Image).findOneBy({ id: config.imageId });
      // A disabled image, or one changed since to mount per-user volumes, gets no new staged workspaces.
      if (!image || !image.enabled || mountsPerUser(image)) return;
      const missing = config.numSessions - pool.length;
      if (missing <= 0) return;
      if (!licensed) {
        this.licenseShort(config.id, 'feature', 'the license in force does not include session_staging; nothing new is staged (the pool drains as it is used and expires)');
        return;
      }
      for (let left = missing; left > 0; left--) {
        const id = await this.recordStaged(tx, config, image);
        if (!id) break;
        created.push(id);
      }
      if (created.length === missing) this.shortBy.delete(config.id);
    });
    if (created.length) this.metrics.stagedCreated.inc(created.length);
    await this.recorder.enqueueProvisions(created);
    return { created: created.length, destroyed };
  }

  /**
   * A staged workspace row on a server of the config's zone (LaunchRecorder.recordStaged: seat, server, row as in
   * every launch), or null when the license's session limit is reached or no server there has room.
   */
  private async recordStaged(tx: EntityManager, config: StagingConfig, image: Image): Promise<string | null> {
    try {
      return await this.recorder.recordStaged(tx, {
        image, zoneId: config.zoneId, stagingConfigId: config.id, expirationDate: addSeconds(new Date(), Number(config.expiration) * 3600),
      });
    } catch (err) {
      if (err instanceof ApiError && err.code === ErrorCode.Conflict) {
        this.licenseShort(config.id, 'limit', `${err.message}; the pool stays short until sessions end`);
        return null;
      }
      if (err instanceof ApiError && err.code === ErrorCode.NoCapacity) {
        this.logger.warn(`staging config ${config.id}: ${err.message}`);
        return null;
      }
      throw err;
    }
  }

  /** Logs why the license leaves a pool short, once per config and reason (the next runs say nothing new). */
  private licenseShort(stagingConfigId: string, reason: 'feature' | 'limit', message: string): void {
    if (this.shortBy.get(stagingConfigId) === reason) return;
    this.shortBy.set(stagingConfigId, reason);
    this.logger.warn(`staging config ${stagingConfigId}: ${message}`);
  }
}
