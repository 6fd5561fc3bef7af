import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, LessThanOrEqual, MoreThan, Repository } from 'typeorm';
import { JwtSigner, SessionClaims } from '@ws/auth';
import { addSeconds, ApiError, newId, parseId } from '@ws/common';
import { creationOrder, hydrate, listPage, PageAnswer, PageRequest, rawQuery, selectColumns } from '@ws/database';
import { integerSettingSql, SettingsService } from '@ws/settings';
import { LoginLink } from './login-link.entity';
import { SessionToken } from './session-token.entity';
import type { User } from './user.entity';
import { UsersService } from './users.service';

export interface IssuedToken {
  token: SessionToken;
  jwt: string;
}

/**
 * User session tokens. A token is valid while its row exists and is unexpired; its JWT must also carry
 * the row's current generation, so a renewal (get_workspace_status) retires every earlier link at once.
 */
@Injectable()
export class SessionTokensService {
  constructor(
    @InjectRepository(SessionToken) private readonly tokens: Repository<SessionToken>,
    @InjectRepository(LoginLink) private readonly loginLinks: Repository<LoginLink>,
    private readonly users: UsersService,
    private readonly settings: SettingsService,
    private readonly signer: JwtSigner,
  ) {}

  async create(userId: string, extraClaims: Partial<SessionClaims> = {}): Promise<IssuedToken> {
    return this.createFor(await this.users.findActive(userId), extraClaims);
  }

  /** For a user the caller loaded (and found active) in this request already: no second lookup. */
  async createFor(user: Pick<User, 'id'>, extraClaims: Partial<SessionClaims> = {}): Promise<IssuedToken> {
    const now = new Date();
    const token = this.tokens.create({
      id: newId(), userId: user.id, tokenDate: now, expiresAt: addSeconds(now, await this.settings.sessionLifetimeSeconds()), generation: 0,
    });
    // Two independent autocommit writes, made at once: a launch waits for this before placing its workspace.
    await Promise.all([this.tokens.insert(token), this.users.recordSession(user.id, now)]);
    return { token, jwt: await this.sign(token, extraClaims) };
  }

  /** A live (unexpired) token by its wire id. */
  async find(sessionToken: string, now = new Date()): Promise<SessionToken> {
    const id = parseId(sessionToken);
    const token = id ? await this.tokens.findOneBy({ id, expiresAt: MoreThan(now) }) : null;
    if (!token) throw ApiError.invalidId('session_token', sessionToken);
    return token;
  }

  /**
   * get_session_tokens: the user's live tokens, all by token date, or one page of them in creation order
   * (`limit`, `cursor`: a promotion moves a token's date, never its creation).
   */
  async list(userId: string, request: PageRequest = {}): Promise<{ rows: SessionToken[]; paging: PageAnswer }> {
    const user = await this.users.find(userId);
    const now = new Date();
    const list = { name: 'session_tokens', from: 'session_tokens t', keys: creationOrder('t'), where: 't.user_id = $1 AND t.expires_at > $2', params: [user.id, now] };
    return listPage(this.tokens.manager, list, request,
      () => this.tokens.find({ where: { userId: user.id, expiresAt: MoreThan(now) }, order: { tokenDate: 'ASC' } }),
      (ids) => this.tokens.find({ where: { id: In(ids), expiresAt: MoreThan(now) } }));
  }

  /** The token with a JWT of its current generation and expiry: reading changes nothing. */
  async reissue(sessionToken: string): Promise<IssuedToken> {
    const token = await this.find(sessionToken);
    return { token, jwt: await this.sign(token) };
  }

  /** Promotion: the date and expiry move forward; earlier JWTs of the token keep their own expiry. */
  async promote(sessionToken: string): Promise<IssuedToken> {
    const token = await this.find(sessionToken);
    const now = new Date();
    token.tokenDate = now;
    token.expiresAt = addSeconds(now, await this.settings.sessionLifetimeSeconds());
    await this.tokens.update({ id: token.id }, { tokenDate: token.tokenDate, expiresAt: token.expiresAt });
    return { token, jwt: await this.sign(token) };
  }

  /** Renewal: like promotion, but every JWT signed before it stops working (a new connection link). */
  async renew(token: SessionToken, extraClaims: Partial<SessionClaims> = {}): Promise<IssuedToken> {
    const now = new Date();
    const expiresAt = addSeconds(now, await this.settings.sessionLifetimeSeconds());
    const rows = await this.tokens
      .createQueryBuilder()
      .update()
      .set({ tokenDate: now, expiresAt, generation: () => 'generation + 1' })
      .where('id = :id AND expires_at > :now', { id: token.id, now })
      .returning('generation')
      .execute();
    if (!rows.affected) throw ApiError.invalidId('session_token', token.id.replace(/-/g, ''));
    const renewed = { ...token, tokenDate: now, expiresAt, generation: (rows.raw as Array<{ generation: number }>)[0].generation };
    return { token: renewed, jwt: await this.sign(renewed, extraClaims) };
  }

  /**
   * Renews the token with this id if it is still live, in one statement that also reads the session lifetime
   * (get_workspace_status renews on every call); null when it expired or was revoked.
   */
  async renewIfLive(tokenId: string, extraClaims: Partial<SessionClaims> = {}): Promise<IssuedToken | null> {
    const now = new Date();
    const db = this.tokens.manager.connection;
    const [row] = await rawQuery(
      db,
      `UPDATE session_tokens SET token_date = $2, expires_at = $2::timestamptz + ${integerSettingSql('session_lifetime')} * interval '1 second', generation = generation + 1
        WHERE id = $1 AND expires_at > $2 RETURNING ${selectColumns(db, SessionToken, 'session_tokens')}`,
      [tokenId, now],
    );
    const token = row ? hydrate(db, SessionToken, row) : null;
    return token ? { token, jwt: await this.sign(token, extraClaims) } : null;
  }

  async delete(sessionToken: string): Promise<void> {
    const token = await this.find(sessionToken);
    await this.tokens.delete({ id: token.id });
  }

  async deleteAllOf(userId: string): Promise<number> {
    const user = await this.users.find(userId);
    const result = await this.tokens.delete({ userId: user.id });
    return result.affected ?? 0;
  }

  /** logout_user: every session token and unspent login link of the user stops working. */
  async logout(userId: string): Promise<void> {
    const user = await this.users.find(userId);
    await this.tokens.manager.transaction(async (tx) => {
      await tx.delete(SessionToken, { userId: user.id });
      await tx.delete(LoginLink, { userId: user.id });
    });
  }

  /** The token a JWT stands for, when the JWT is authentic, unexpired, unrevoked and not superseded. */
  async verify(jwt: string): Promise<{ token: SessionToken; claims: SessionClaims } | null> {
    const claims = await this.signer.verify(jwt);
    if (!claims) return null;
    const token = await this.tokens.findOneBy({ id: claims.sid, expiresAt: MoreThan(new Date()) });
    if (!token || token.userId !== claims.sub || token.generation !== claims.gen) return null;
    return { token, claims };
  }

  async purgeExpired(now = new Date()): Promise<number> {
    return (await this.tokens.delete({ expiresAt: LessThanOrEqual(now) })).affected ?? 0;
  }

  private sign(token: SessionToken, extraClaims: Partial<SessionClaims> = {}): Promise<string> {
    return this.signer.sign({ ...extraClaims, sub: token.userId, sid: token.id, gen: token.generation }, token.expiresAt);
  }
}
