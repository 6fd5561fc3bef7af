import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ApiError, ErrorCode, randomSecret } from '@ws/common';
import { rawQuery } from '@ws/database';
import { Setting } from './setting.entity';

type Check = (value: unknown) => string | null;
const intBetween = (min: number, max: number): Check => (v) =>
  Number.isInteger(v) && (v as number) >= min && (v as number) <= max ? null : `must be an integer from ${min} to ${max}`;
const shortText = (max: number): Check => (v) => (typeof v === 'string' && v.length <= max ? null : `must be a string of at most ${max} characters`);
const oneOf = (...values: string[]): Check => (v) => (values.includes(v as string) ? null : `must be one of ${values.join(', ')}`);

/** The global settings an operator may change, with their rules. Defaults are seeded by migration. */
export const GLOBAL_SETTINGS = {
  /** Session Lifetime, seconds: expires_at = session_token_date + this. */
  session_lifetime: intBetween(60, 366 * 86400),
  /** Same Site Cookie Policy of every cookie the browser client sets; None allows cross-site iframes. */
  same_site_cookie_policy: oneOf('Strict', 'Lax', 'None'),
  /** Seconds a keepalive extends a workspace by when none of the user's groups sets keepalive_expiration. */
  default_keepalive_expiration: intBetween(60, 366 * 86400),
  /** Seconds a get_login url stays usable. */
  login_link_lifetime: intBetween(10, 86400),
  /** Captcha of cast links with require_recaptcha: the site key the browser shows, the private key the api verifies with. */
  recaptcha_site_key: shortText(512),
  recaptcha_private_key: shortText(512),
} satisfies Record<string, Check>;
export type GlobalSettingName = keyof typeof GLOBAL_SETTINGS;

const SIGNING_KEY = 'jwt_signing_key';

/**
 * An integer global setting as a SQL expression, for a statement that needs it (read when the statement runs,
 * like `get`, but in the same round trip). NULL when the setting is missing, which the statement's NOT NULL refuses.
 */
export const integerSettingSql = (name: GlobalSettingName) => `(SELECT (value #>> '{}')::integer FROM settings WHERE key = '${name}')`;

@Injectable()
export class SettingsService {
  private signingKey: string | null = null;

  constructor(@InjectRepository(Setting) private readonly settings: Repository<Setting>) {}

  /**
   * Read on every use, not cached: a change (the CLI, or SQL by hand) takes effect at the next request on every
   * replica, with no notice to wait for. A raw primary-key select, as it runs on hot paths (status, lists).
   */
  async get<T>(name: GlobalSettingName): Promise<T> {
    const [row] = await rawQuery<{ value: T }>(this.settings.manager.connection, 'SELECT value FROM settings WHERE key = $1', [name]);
    if (!row) throw new Error(`global setting ${name} is missing; run the migrations`);
    return row.value;
  }

  async all(): Promise<Record<string, unknown>> {
    const rows = await this.settings.find({ order: { key: 'ASC' } });
    return Object.fromEntries(rows.filter((r) => r.key in GLOBAL_SETTINGS).map((r) => [r.key, r.value]));
  }

  async set(name: string, value: unknown): Promise<void> {
    if (!(name in GLOBAL_SETTINGS)) throw new ApiError(ErrorCode.InvalidRequest, `Unknown setting ${name}; known: ${Object.keys(GLOBAL_SETTINGS).join(', ')}`);
    const problem = GLOBAL_SETTINGS[name as GlobalSettingName](value);
    if (problem) throw new ApiError(ErrorCode.InvalidRequest, `${name} ${problem}`);
    await this.settings.upsert({ key: name, value: value as object }, ['key']);
  }

  sessionLifetimeSeconds(): Promise<number> {
    return this.get<number>('session_lifetime');
  }

  /** The HMAC key session JWTs are signed with: made once per deployment, on first use, never logged. */
  async jwtSigningKey(): Promise<string> {
    if (this.signingKey) return this.signingKey;
    await this.settings.createQueryBuilder().insert().values({ key: SIGNING_KEY, value: randomSecret(32) }).orIgnore().execute();
    const row = await this.settings.findOneByOrFail({ key: SIGNING_KEY });
    this.signingKey = row.value as string;
    return this.signingKey;
  }
}
