import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsNull, LessThanOrEqual, MoreThan, Repository } from 'typeorm';
import { addSeconds, ApiError, AppConfig, ErrorCode, newId, randomSecret, sha256, toWireId } from '@ws/common';
import { SettingsService } from '@ws/settings';
import { LoginLink } from './login-link.entity';
import { IssuedToken, SessionTokensService } from './session-tokens.service';
import { UsersService } from './users.service';

/** get_login: a one-time url that logs its holder in as the user, once, within login_link_lifetime seconds. */
@Injectable()
export class LoginLinksService {
  constructor(
    @InjectRepository(LoginLink) private readonly links: Repository<LoginLink>,
    private readonly users: UsersService,
    private readonly tokens: SessionTokensService,
    private readonly settings: SettingsService,
    private readonly config: AppConfig,
  ) {}

  async create(userId: string): Promise<string> {
    const user = await this.users.findActive(userId);
    const secret = randomSecret(32);
    const lifetime = await this.settings.get<number>('login_link_lifetime');
    await this.links.insert({ id: newId(), userId: user.id, secretSha256: sha256(secret), expiresAt: addSeconds(new Date(), lifetime), usedAt: null });
    return `${this.config.PUBLIC_BASE_URL}/#/login/${secret}`;
  }

  /**
   * Spends the link (atomically: a second use fails) and opens a session for its user. A locked or disabled
   * user's link is refused (409) and stays unspent, so it works again if the user is unlocked in time.
   */
  async redeem(secret: string): Promise<IssuedToken> {
    const hash = sha256(secret);
    const result = await this.links
      .createQueryBuilder()
      .update()
      .set({ usedAt: () => 'now()' })
      .where('secret_sha256 = :hash AND used_at IS NULL AND expires_at > now()', { hash })
      .andWhere('user_id IN (SELECT id FROM users WHERE NOT locked AND NOT disabled)')
      .returning('user_id')
      .execute();
    const row = (result.raw as Array<{ user_id: string }>)[0];
    if (!row) {
      const unspent = await this.links.findOneBy({ secretSha256: hash, usedAt: IsNull(), expiresAt: MoreThan(new Date()) });
      if (unspent) await this.users.findActive(toWireId(unspent.userId)); // throws: locked or disabled
      throw new ApiError(ErrorCode.Unauthenticated, 'This login link is invalid, expired or already used');
    }
    return this.tokens.create(row.user_id);
  }

  async deleteAllOf(userId: string): Promise<void> {
    await this.links.delete({ userId });
  }

  async purgeExpired(now = new Date()): Promise<number> {
    return (await this.links.delete({ expiresAt: LessThanOrEqual(now) })).affected ?? 0;
  }
}
