import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { ApiError, AppConfig, ErrorCode } from '@ws/common';
import { PgNotifications, rawQuery } from '@ws/database';
import { IssuerKeys } from './issuer-keys';
import { featureSet, isLicenseFeature, LicenseEntitlement, LicenseFeature, LicenseFeatures, verifyLicenseKey } from './license-key';

/** The license in force: a verified entitlement and what its activation chose. */
export interface AppliedLicense {
  entitlement: LicenseEntitlement;
  /** Concurrent workspaces allowed: the activation's seats (at most the entitlement's limit). */
  seats: number;
  issuedTo: string;
  activatedAt: Date;
}

/** Notified by a trigger on `licenses` (any insert, update or delete). */
export const LICENSE_CHANGED_CHANNEL = 'license_changed';
/** Belt and braces: even with change notices, read the license again at least this often. */
const CACHE_TTL_MS = 60_000;

/** A row of `licenses`, as read raw. */
export interface LicenseRow {
  license_id: string;
  activation_key: string;
  seats: number;
  issued_to: string;
  activated_at: Date;
}

/** Something that runs SQL: the data source, or the caller's transaction (no second pool connection inside it). */
type Runner = Pick<EntityManager, 'query'> | null;

/**
 * What this deployment may do: the applied license (the newest activation, re-verified against the trusted
 * issuer keys, unexpired) or the free tier (UNLICENSED_SESSION_LIMIT, UNLICENSED_FEATURES). Every api process and
 * worker caches it and drops the cache on the `license_changed` notice, so an activation applies everywhere at
 * once; expiry is judged on every call, so a license stops applying at its expiration without a timer. While
 * notices cannot be received nothing is served from the cache.
 */
@Injectable()
export class Entitlements implements OnModuleInit {
  private readonly logger = new Logger(Entitlements.name);
  private cached: { license: AppliedLicense | null; loadedAt: number } | null = null;
  private loading: Promise<AppliedLicense | null> | null = null;
  /** Bumped by every notice: a load that started before one must not be cached. */
  private generation = 0;
  private readonly freeFeatures: LicenseFeatures;
  /** What was last logged as not applying (refused or expired), so it is said once, not per request. */
  private reported = '';

  constructor(
    private readonly db: DataSource,
    private readonly notifications: PgNotifications,
    private readonly issuers: IssuerKeys,
    private readonly config: AppConfig,
  ) {
    this.freeFeatures = featureSet(config.UNLICENSED_FEATURES.split(',').map((f) => f.trim()).filter(isLicenseFeature));
  }

  async onModuleInit(): Promise<void> {
    this.notifications.onReset(() => this.invalidate());
    await this.notifications.subscribe(LICENSE_CHANGED_CHANNEL, () => this.invalidate());
  }

  /** Forget the cached license: the next call reads it again. */
  invalidate(): void {
    this.cached = null;
    this.loading = null;
    this.generation++;
  }

  /** The applied license, or null when none is (never activated, expired, or its issuer is no longer trusted). */
  async current(now = new Date(), runner: Runner = null): Promise<AppliedLicense | null> {
    const license = await this.applied(runner);
    if (license && license.entitlement.expiration.getTime() <= now.getTime()) {
      this.reportOnce(`expired:${license.entitlement.license_id}`, `License ${license.entitlement.license_id} expired at ${license.entitlement.expiration.toISOString()}; the free tier applies`);
      return null;
    }
    return license;
  }

  /** The feature flags in force: the license's, or the free tier's. */
  async features(now = new Date()): Promise<LicenseFeatures> {
    return (await this.current(now))?.entitlement.features ?? { ...this.freeFeatures };
  }

  /** Concurrent workspaces allowed, staged ones included. */
  async sessionLimit(now = new Date()): Promise<number> {
    return (await this.current(now))?.seats ?? this.config.UNLICENSED_SESSION_LIMIT;
  }

  /**
   * Refuses (403) what the license in force does not include. `what` names the capability for the message,
   * e.g. assertFeature('session_casting', 'Casting').
   */
  async assertFeature(name: LicenseFeature, what: string, now = new Date()): Promise<void> {
    const license = await this.current(now);
    const features = license?.entitlement.features ?? this.freeFeatures;
    if (features[name]) return;
    const standing = license ? `the applied license ${license.entitlement.license_id} does not include it` : 'no license is applied (free tier)';
    throw new ApiError(ErrorCode.Forbidden, `${what} requires a license with the ${name} feature; ${standing}`);
  }

  /**
   * Inside the caller's transaction (the launch's "record" step, staging's creation), right before it inserts the
   * workspace rows: refuses (409) when live workspaces (every status but deleted, staged ones included) plus
   * `count` would exceed the limit. The caller must insert its rows in this same transaction. `countLive` counts
   * them and makes the count exact: the workspaces library owns that table (countLiveWorkspaces locks its seat
   * counter row until the commit, so concurrent reservations take turns there), this one does not.
   */
  async reserveSessionCapacity(tx: EntityManager, countLive: (tx: EntityManager) => Promise<number>, count = 1): Promise<void> {
    if (!Number.isInteger(count) || count < 1) throw new Error(`reserveSessionCapacity: count must be a positive integer (${count})`);
    const license = await this.current(new Date(), tx);
    const limit = license?.seats ?? this.config.UNLICENSED_SESSION_LIMIT;
    const live = await countLive(tx);
    if (live + count <= limit) return;
    const source = license ? `license ${license.entitlement.license_id}` : 'free tier (no license applied)';
    throw new ApiError(
      ErrorCode.Conflict,
      `Session limit reached: the ${source} allows ${limit} concurrent workspaces and ${live} are live (staged included)` +
        (count > 1 ? `; ${count} more were asked for` : ''),
    );
  }

  /** Drops the cache and reads the license now (after an activation in this process, before its notice arrives). */
  async refresh(): Promise<AppliedLicense | null> {
    this.invalidate();
    return this.current();
  }

  private applied(runner: Runner): Promise<AppliedLicense | null> {
    const cached = this.cached;
    if (cached && this.notifications.listening && Date.now() - cached.loadedAt < CACHE_TTL_MS) return Promise.resolve(cached.license);
    // Inside a transaction read on its connection: waiting for a second pool connection while holding one can starve the pool.
    if (runner) return this.load(runner);
    this.loading ??= this.load(null).finally(() => (this.loading = null));
    return this.loading;
  }

  private async load(runner: Runner): Promise<AppliedLicense | null> {
    const generation = this.generation;
    const sql = 'SELECT license_id, activation_key, seats, issued_to, activated_at FROM licenses ORDER BY activated_at DESC, license_id LIMIT 1';
    const [row] = runner ? ((await runner.query(sql)) as LicenseRow[]) : await rawQuery<LicenseRow>(this.db, sql);
    const license = row ? this.verify(row) : null;
    if (generation === this.generation && this.notifications.listening) this.cached = { license, loadedAt: Date.now() };
    return license;
  }

  private verify(row: LicenseRow): AppliedLicense | null {
    try {
      const entitlement = verifyLicenseKey(row.activation_key, this.issuers.keys, null);
      return { entitlement, seats: Math.min(row.seats, entitlement.limit), issuedTo: row.issued_to, activatedAt: new Date(row.activated_at) };
    } catch (err) {
      this.reportOnce(`refused:${row.license_id}`, `The applied license ${row.license_id} no longer verifies (${(err as Error).message}); the free tier applies`);
      return null;
    }
  }

  private reportOnce(what: string, message: string): void {
    if (this.reported === what) return;
    this.reported = what;
    this.logger.warn(message);
  }
}
