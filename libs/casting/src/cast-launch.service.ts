import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { DataSource } from 'typeorm';
import { ApiError, AppConfig, dependencyOutage, ErrorCode, parseId, RETRY_AFTER_SECONDS, toWireId } from '@ws/common';
import { GroupsService } from '@ws/groups';
import { Entitlements } from '@ws/licensing';
import { RedisConnections } from '@ws/queue';
import { SettingsService } from '@ws/settings';
import { SessionTokensService, User, UsersService } from '@ws/users';
import { connectPath, latestRunningWorkspace, LaunchRecorder, WorkspaceLaunch } from '@ws/workspaces';
import type { CastLaunchRequest } from './dto/cast-config.requests';
import { CAST_FLAGS, CastConfig, ENFORCED_CLIENT_SETTINGS } from './cast-config.entity';
import { CastingService } from './casting.service';

/** Why a cast launch was refused: the browser client names it on its error page (the N/O contract). */
export type CastRefusal =
  | 'unknown_link' | 'expired' | 'referrer' | 'session_limit' | 'address_limit' | 'login_required'
  | 'captcha_required' | 'captcha_failed' | 'network_not_allowed' | 'no_capacity';

const REFUSAL_CODES: Record<CastRefusal, ErrorCode> = {
  unknown_link: ErrorCode.NotFound,
  expired: ErrorCode.Forbidden,
  referrer: ErrorCode.Forbidden,
  session_limit: ErrorCode.Forbidden,
  address_limit: ErrorCode.RateLimited,
  login_required: ErrorCode.Unauthenticated,
  captcha_required: ErrorCode.Forbidden,
  captcha_failed: ErrorCode.Forbidden,
  network_not_allowed: ErrorCode.InvalidRequest,
  no_capacity: ErrorCode.NoCapacity,
};

/** A refused visit: `{error_message, error_url, reason}`, with the status of the reason's code. */
export function castRefused(reason: CastRefusal, message: string, errorUrl: string | null, retryAfterSeconds?: number): ApiError {
  // The link's key is its credential: a key that names no link counts as a failed authentication of the address.
  return new ApiError(REFUSAL_CODES[reason], message, { error_url: errorUrl, reason }, {
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }), failedCredential: reason === 'unknown_link',
  });
}

/** Who is visiting, as the request edge saw it. */
export interface CastVisitor {
  /** Source address (Fastify's request.ip: X-Forwarded-For only from TRUSTED_PROXIES). */
  address: string;
  /** The Referer header; the body's `referrer` (the page that linked to the cast link) wins over it. */
  referer: string | undefined;
}

export interface CastLaunchAnswer {
  workspace_id: string;
  user_id: string;
  session_jwt: string;
  workspace_url: string;
  resumed: boolean;
  disable_control_panel: boolean;
  disable_tips: boolean;
  disable_fixed_res: boolean;
}

/** Bounds the wait on the captcha verify endpoint: a hung verifier must not hang the visit. */
const VERIFY_TIMEOUT_MS = 10_000;

/**
 * The public launch of a cast link (`POST /api/client/cast`): applies the config's rules in order (link,
 * validity, referrer, visitor, captcha, network, resume, address limit, session limit) and launches through
 * WorkspaceLaunch, the same pipeline as request_workspace (staged workspaces included).
 */
@Injectable()
export class CastLaunch {
  private readonly logger = new Logger(CastLaunch.name);
  private readonly limiters = new Map<string, RateLimiterRedis>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly casting: CastingService,
    private readonly launcher: WorkspaceLaunch,
    private readonly recorder: LaunchRecorder,
    private readonly users: UsersService,
    private readonly tokens: SessionTokensService,
    private readonly settings: SettingsService,
    private readonly redis: RedisConnections,
    private readonly config: AppConfig,
    private readonly entitlements: Entitlements,
    private readonly groups: GroupsService,
  ) {}

  /** `GET /api/client/cast/<key>/info`: what the client shows before launching. */
  async info(key: string) {
    const config = await this.findLink(key);
    const siteKey = await this.settings.get<string>('recaptcha_site_key');
    const captcha = this.needsCaptcha(config);
    return {
      require_recaptcha: captcha, recaptcha_site_key: siteKey || null, allow_anonymous: config.allowAnonymous,
      recaptcha_script_url: captcha ? this.config.RECAPTCHA_SCRIPT_URL : null,
    };
  }

  /**
   * Every refusal of a link that exists carries its error_url: the link's own rules, the license, the launch
   * pipeline, and outages (the captcha verifier, Redis during the address limit, PostgreSQL) alike.
   */
  async launch(body: CastLaunchRequest, visitor: CastVisitor): Promise<CastLaunchAnswer> {
    const config = await this.findLink(body.key);
    try {
      return await this.launchLink(config, body, visitor);
    } catch (err) {
      throw withErrorUrl(err, config.errorUrl);
    }
  }

  private async launchLink(config: CastConfig, body: CastLaunchRequest, visitor: CastVisitor): Promise<CastLaunchAnswer> {
    const refuse = (reason: CastRefusal, message: string, retryAfterSeconds?: number) => castRefused(reason, message, config.errorUrl, retryAfterSeconds);
    await this.entitlements.assertFeature('session_casting', 'Session casting').catch((err: unknown) => {
      throw withErrorUrl(err, config.errorUrl, 'not_licensed');
    });
    if (config.validUntil && config.validUntil.getTime() <= Date.now()) throw refuse('expired', 'This link has expired');
    if (!referrerAllowed(config.allowedReferrers, body.referrer ?? visitor.referer)) throw refuse('referrer', 'This link may not be opened from this page');
    const session = body.session_jwt ? await this.loginOf(body.session_jwt) : null;
    if (session === 'invalid') throw refuse('login_required', 'Your login session is not valid any more; log in again');
    // A workspace's or a sharing link's token (or an anonymous visitor's) grants that workspace only: on a link
    // that needs a login it is refused; on one open to anyone, the visit is anonymous (captcha and all).
    if (session === 'not_a_login' && !config.allowAnonymous) throw refuse('login_required', 'A workspace or sharing link is not a login; log in to open this link');
    const loggedIn = typeof session === 'object' ? session : null;
    if (!loggedIn && !config.allowAnonymous) throw refuse('login_required', 'Log in to open this link');
    if (this.needsCaptcha(config) && !loggedIn) await this.verifyCaptcha(body.recaptcha_token, visitor.address, refuse, config.errorUrl);
    if (body.container_network !== undefined) this.checkNetwork(config, body.container_network, refuse);
    if (loggedIn && config.allowResume) {
      const resumed = await this.resume(config, loggedIn);
      if (resumed) return resumed;
    }
    if (config.limitIps) await this.countAddress(config, visitor.address, refuse);
    if (config.limitSessions && !(await this.takeSession(config.id))) throw refuse('session_limit', 'This link has no sessions left');
    // Only a user made for this visit may be removed when the launch fails; a logged-in person is never.
    const madeForVisit = loggedIn ? null : await this.anonymousUser(config);
    const user = loggedIn ?? (madeForVisit as User);
    try {
      const answer = await this.launcher.launch({
        user, imageId: toWireId(config.imageId), enableSharing: config.enableSharing, environment: {},
        workspaceUrl: (config.dynamicWorkspaceUrl ? body.workspace_url : undefined) ?? config.workspaceUrl ?? undefined,
        clientSettingsOverride: config.enforceClientSettings ? enforcedSettings(config) : {}, containerNetwork: body.container_network,
      });
      return this.answer(config, { workspaceId: answer.workspace_id, userId: answer.user_id, jwt: answer.session_token, resumed: false });
    } catch (err) {
      // No session came of it: the count goes back, and a visitor's user made for it goes.
      if (config.limitSessions) await this.returnSession(config.id);
      if (madeForVisit) await this.users.remove(madeForVisit.id).catch(() => undefined);
      if (err instanceof ApiError && err.code === ErrorCode.NoCapacity) throw refuse('no_capacity', err.message, err.retryAfterSeconds);
      // The license's session limit (409) still sends the visitor to the link's error_url.
      if (err instanceof ApiError && err.code === ErrorCode.Conflict) throw withErrorUrl(err, config.errorUrl, 'session_limit_reached');
      throw err;
    }
  }

  private async findLink(key: string): Promise<CastConfig> {
    const config = await this.casting.findByKey(key);
    if (!config) throw castRefused('unknown_link', 'This link does not exist', null);
    return config;
  }

  /** require_recaptcha applies with allow_anonymous (spec, casting rule 7). */
  private needsCaptcha(config: CastConfig): boolean {
    return config.requireRecaptcha && config.allowAnonymous;
  }

  /** dynamic_container_network, and a network the link's image lists in selectable_networks; refused, never ignored. */
  private checkNetwork(config: CastConfig, network: string, refuse: (r: CastRefusal, m: string) => ApiError): void {
    if (!config.dynamicContainerNetwork) throw refuse('network_not_allowed', 'This link does not allow choosing the container network');
    if (!config.image?.selectableNetworks.includes(network)) {
      throw refuse('network_not_allowed', `Image ${config.image?.friendlyName ?? ''} does not allow the container network ${network}`);
    }
  }

  /**
   * Who a session_jwt logs in: a login is a session of a real user that was minted for no one workspace (a login
   * link, create_session_token). A workspace's link, a view-only sharing link and an anonymous visitor's token are
   * live but 'not_a_login'; a forged, expired or revoked one, or a locked or disabled user's, is 'invalid'.
   */
  private async loginOf(jwt: string): Promise<User | 'invalid' | 'not_a_login'> {
    const verified = await this.tokens.verify(jwt);
    if (!verified) return 'invalid';
    const user = await this.users.find(toWireId(verified.token.userId)).catch(() => null);
    if (!user || user.locked || user.disabled) return 'invalid';
    if (user.anonymous || verified.claims.view_only === true || verified.claims.workspace_id !== undefined) return 'not_a_login';
    return user;
  }

  private async verifyCaptcha(token: string | undefined, address: string, refuse: (r: CastRefusal, m: string) => ApiError, errorUrl: string | null): Promise<void> {
    if (!token) throw refuse('captcha_required', 'Solve the captcha to open this link');
    const secret = await this.settings.get<string>('recaptcha_private_key');
    if (!secret) throw refuse('captcha_failed', 'The captcha is not configured on this service (recaptcha_private_key)');
    let success = false;
    try {
      const res = await fetch(this.config.RECAPTCHA_VERIFY_URL, {
        method: 'POST', body: new URLSearchParams({ secret, response: token, remoteip: address }), signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS),
      });
      success = res.ok && ((await res.json()) as { success?: unknown }).success === true;
    } catch (err) {
      this.logger.warn(`captcha verify failed: ${(err as Error).message}`);
      throw new ApiError(ErrorCode.Unavailable, 'The captcha could not be verified right now; try again', { error_url: errorUrl, reason: 'captcha_failed' }, { retryAfterSeconds: RETRY_AFTER_SECONDS });
    }
    if (!success) throw refuse('captcha_failed', 'The captcha was not solved');
  }

  /** A running workspace of the link's image that the person already has: same workspace, a new link. */
  private async resume(config: CastConfig, user: User): Promise<CastLaunchAnswer | null> {
    const workspace = await latestRunningWorkspace(this.db.manager, user.id, config.imageId);
    if (!workspace) return null;
    const issued = await this.recorder.ownerToken(user, workspace.id);
    return this.answer(config, { workspaceId: toWireId(workspace.id), userId: toWireId(user.id), jwt: issued.jwt, resumed: true });
  }

  /** ip_request_limit launches per source address per ip_request_seconds, counted in Redis (every replica shares it). */
  private async countAddress(config: CastConfig, address: string, refuse: (r: CastRefusal, m: string, retry?: number) => ApiError): Promise<void> {
    this.redis.assertConnected(); // 503 while Redis is down: the limit is never lifted by an outage
    const name = `${config.id}:${config.ipRequestLimit}:${config.ipRequestSeconds}`;
    let limiter = this.limiters.get(name);
    if (!limiter) {
      limiter = new RateLimiterRedis({
        storeClient: this.redis.shared(), keyPrefix: `${this.redis.key()}:cast:${name}`, points: config.ipRequestLimit, duration: config.ipRequestSeconds,
      });
      this.limiters.set(name, limiter);
    }
    try {
      await limiter.consume(address);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) throw refuse('address_limit', 'Too many sessions from your address; try again later', rejection.msBeforeNext / 1000);
      throw rejection;
    }
  }

  /** One session off session_remaining, atomically: false when none is left (never below 0, on any replica). */
  private async takeSession(configId: string): Promise<boolean> {
    const rows = (await this.db.query(
      'UPDATE cast_configs SET session_remaining = session_remaining - 1 WHERE id = $1 AND session_remaining > 0 RETURNING session_remaining', [configId],
    )) as [unknown[], number];
    return rows[0].length === 1;
  }

  private async returnSession(configId: string): Promise<void> {
    await this.db.query('UPDATE cast_configs SET session_remaining = session_remaining + 1 WHERE id = $1', [configId]).catch((err: Error) => {
      this.logger.warn(`session_remaining of cast config ${configId} not restored: ${err.message}`);
    });
  }

  /** A new anonymous user per launch, in All Users and in the link's group. */
  private async anonymousUser(config: CastConfig): Promise<User> {
    const user = await this.users.createAnonymous();
    if (config.groupId) {
      await this.groups.join(user.id, config.groupId);
    }
    return user;
  }

  private answer(config: CastConfig, launched: { workspaceId: string; userId: string; jwt: string; resumed: boolean }): CastLaunchAnswer {
    const flags = { disable_control_panel: config.disableControlPanel, disable_tips: config.disableTips, disable_fixed_res: config.disableFixedRes };
    const query = Object.entries(flags).filter(([, on]) => on).map(([name]) => `${name}=1`).join('&');
    const path = connectPath(parseId(launched.workspaceId) as string, parseId(launched.userId) as string, launched.jwt);
    return {
      workspace_id: launched.workspaceId, user_id: launched.userId, session_jwt: launched.jwt, resumed: launched.resumed,
      workspace_url: query ? `${path}?${query}` : path, ...flags,
    };
  }
}

/**
 * A refusal from outside the link's rules (the license, the launch pipeline, an outage) with the link's error_url,
 * as the browser client needs it to send the visitor on; its status and message stay. A PostgreSQL or Redis
 * outage becomes the 503 the exception filter would answer, with the error_url. An unexpected error (a bug: 500
 * with an error id) passes unchanged.
 */
function withErrorUrl(err: unknown, errorUrl: string | null, reason?: string): unknown {
  if (err instanceof ApiError) {
    if ('error_url' in err.details) return err;
    return new ApiError(err.code, err.message, { ...err.details, error_url: errorUrl, reason: reason ?? reasonOf(err.code) }, { retryAfterSeconds: err.retryAfterSeconds });
  }
  const dependency = dependencyOutage(err);
  if (!dependency) return err;
  return new ApiError(ErrorCode.Unavailable, `${dependency} is unavailable; retry later`, { error_url: errorUrl, reason: 'unavailable' }, { retryAfterSeconds: RETRY_AFTER_SECONDS });
}

/** The reason named for a refusal that is not one of the link's own rules. */
function reasonOf(code: ErrorCode): string {
  switch (code) {
    case ErrorCode.Unavailable:
      return 'unavailable';
    case ErrorCode.Conflict:
      return 'session_limit_reached';
    default:
      return 'launch_refused';
  }
}

/** The client settings a config with enforce_client_settings puts on its sessions. */
function enforcedSettings(config: CastConfig): Record<string, boolean> {
  return Object.fromEntries(ENFORCED_CLIENT_SETTINGS.map((name) => [name, config[CAST_FLAGS[name]]]));
}

/** True when no referrers are listed, or the Referer's host (or host:port) is one of them; `*.example.com` matches subdomains. */
export function referrerAllowed(allowed: string[], referer: string | undefined): boolean {
  if (allowed.length === 0) return true;
  if (!referer) return false;
  let url: URL;
  try {
    url = new URL(referer);
  } catch {
    return false;
  }
  const host = url.hostname.toLowerCase();
  return allowed.some((entry) => {
    const wanted = entry.toLowerCase();
    if (wanted.includes(':')) return wanted === url.host.toLowerCase();
    if (wanted.startsWith('*.')) return host.endsWith(wanted.slice(1));
    return host === wanted;
  });
}
