import { DataSource } from 'typeorm';
import * as jwt from 'jsonwebtoken';
import { HEX32, TestApi, TestKey, TIMESTAMP } from './harness';

const parse = (ts: string) => new Date(`${ts.replace(' ', 'T')}Z`).getTime();

describe('session tokens and login links', () => {
  let api: TestApi;
  let key: TestKey;
  let admin: TestKey;

  beforeAll(async () => {
    api = await TestApi.start();
    key = await api.key(['Users Auth Session']);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  const newUser = async (username: string) => (await api.call('create_user', admin, { target_user: { username } })).body.user.user_id as string;
  const whoami = (sessionJwt: string) => api.raw().post('/api/client/session').send({ session_jwt: sessionJwt });

  it('create_session_token answers the token, its dates (Session Lifetime apart) and a signed JWT', async () => {
    const userId = await newUser('tok-create');
    const res = await api.call('create_session_token', key, { target_user: { user_id: userId } });
    expect(res.status).toBe(200);
    const t = res.body.session_token;
    expect(t).toEqual({ session_token: expect.stringMatching(HEX32), session_token_date: expect.stringMatching(TIMESTAMP), expires_at: expect.stringMatching(TIMESTAMP), session_jwt: expect.any(String) });
    expect(parse(t.expires_at) - parse(t.session_token_date)).toBe(86400 * 1000);
    const claims = jwt.decode(t.session_jwt) as Record<string, unknown>;
    expect(claims).toEqual(expect.objectContaining({ sub: expect.any(String), sid: expect.any(String), iss: 'workspace-server' }));
    expect((await whoami(t.session_jwt)).body).toEqual({ user_id: userId, username: 'tok-create', expires_at: t.expires_at });
    // last_session records the login.
    const user = (await api.call('get_user', admin, { target_user: { user_id: userId } })).body.user;
    expect(user.last_session).toMatch(TIMESTAMP);
  });

  it('follows the global setting Session Lifetime', async () => {
    await api.app.get(DataSource).query(`UPDATE settings SET value = '600' WHERE key = 'session_lifetime'`);
    try {
      const userId = await newUser('tok-lifetime');
      const t = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
      expect(parse(t.expires_at) - parse(t.session_token_date)).toBe(600 * 1000);
    } finally {
      await api.app.get(DataSource).query(`UPDATE settings SET value = '86400' WHERE key = 'session_lifetime'`);
    }
  });

  it('a forged or tampered JWT is refused', async () => {
    const userId = await newUser('tok-forged');
    const t = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    const forged = jwt.sign(jwt.decode(t.session_jwt) as object, 'not-the-key');
    expect((await whoami(forged)).status).toBe(401);
    expect((await whoami(`${t.session_jwt}x`)).status).toBe(401);
  });

  it('get_session_token and get_session_tokens read tokens; the list omits the JWT', async () => {
    const userId = await newUser('tok-read');
    const a = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    const b = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    const one = await api.call('get_session_token', key, { target_session_token: { session_token: a.session_token } });
    expect(one.body.session_token).toEqual({ ...a, session_jwt: expect.any(String) });
    expect((await whoami(one.body.session_token.session_jwt)).status).toBe(200);
    const list = await api.call('get_session_tokens', key, { target_user: { user_id: userId } });
    expect(list.body).toEqual({
      session_tokens: [
        { session_token: a.session_token, session_token_date: a.session_token_date, expires_at: a.expires_at },
        { session_token: b.session_token, session_token_date: b.session_token_date, expires_at: b.expires_at },
      ],
    });
  });

  it('update_session_token promotes: both dates move forward and a new JWT is returned', async () => {
    const userId = await newUser('tok-promote');
    const a = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    const res = await api.call('update_session_token', key, { target_session_token: { session_token: a.session_token } });
    expect(res.status).toBe(200);
    const p = res.body.session_token;
    expect(p.session_token).toBe(a.session_token);
    expect(parse(p.session_token_date)).toBeGreaterThanOrEqual(parse(a.session_token_date));
    expect(parse(p.expires_at)).toBeGreaterThanOrEqual(parse(a.expires_at));
    expect(parse(p.expires_at) - parse(p.session_token_date)).toBe(86400 * 1000);
    expect((await whoami(p.session_jwt)).status).toBe(200);
  });

  it('delete_session_token makes the token unusable', async () => {
    const userId = await newUser('tok-delete');
    const a = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    expect((await whoami(a.session_jwt)).status).toBe(200);
    expect((await api.call('delete_session_token', key, { target_session_token: { session_token: a.session_token } })).body).toEqual({});
    expect((await whoami(a.session_jwt)).status).toBe(401);
    const again = await api.call('get_session_token', key, { target_session_token: { session_token: a.session_token } });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ error_message: `Invalid session_token (${a.session_token})` });
  });

  it('delete_session_tokens removes every token of the user', async () => {
    const userId = await newUser('tok-delete-all');
    const a = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    const b = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    expect((await api.call('delete_session_tokens', key, { target_user: { user_id: userId } })).body).toEqual({});
    expect((await whoami(a.session_jwt)).status).toBe(401);
    expect((await whoami(b.session_jwt)).status).toBe(401);
    expect((await api.call('get_session_tokens', key, { target_user: { user_id: userId } })).body).toEqual({ session_tokens: [] });
  });

  it('logout_user ends every session of the user, and only of that user', async () => {
    const userId = await newUser('tok-logout');
    const otherId = await newUser('tok-logout-other');
    const a = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    const other = (await api.call('create_session_token', key, { target_user: { user_id: otherId } })).body.session_token;
    const loginUrl = (await api.call('get_login', key, { target_user: { user_id: userId } })).body.url as string;
    expect((await api.call('logout_user', key, { target_user: { user_id: userId } })).body).toEqual({});
    expect((await whoami(a.session_jwt)).status).toBe(401);
    expect((await whoami(other.session_jwt)).status).toBe(200);
    const redeem = await api.raw().post('/api/client/login').send({ login_token: loginUrl.split('/#/login/')[1] });
    expect(redeem.status).toBe(401);
  });

  it('tokens are refused for a disabled user, and a disabled user\'s JWT stops working', async () => {
    const userId = await newUser('tok-disabled');
    const a = (await api.call('create_session_token', key, { target_user: { user_id: userId } })).body.session_token;
    await api.call('update_user', admin, { target_user: { user_id: userId, disabled: true } });
    const res = await api.call('create_session_token', key, { target_user: { user_id: userId } });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error_message: `User (${userId}) is disabled` });
    expect((await whoami(a.session_jwt)).status).toBe(409);
  });

  it('get_login answers a one-time url that logs the user in once', async () => {
    const userId = await newUser('tok-login');
    const res = await api.call('get_login', key, { target_user: { user_id: userId } });
    expect(res.status).toBe(200);
    expect(res.body.url).toMatch(/^http:\/\/127\.0\.0\.1:8080\/#\/login\/[0-9a-f]{64}$/);
    const secret = (res.body.url as string).split('/#/login/')[1];
    const first = await api.raw().post('/api/client/login').send({ login_token: secret });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ user_id: userId, session_token: expect.objectContaining({ session_jwt: expect.any(String) }) });
    expect((await whoami(first.body.session_token.session_jwt)).body.user_id).toBe(userId);
    const second = await api.raw().post('/api/client/login').send({ login_token: secret });
    expect(second.status).toBe(401);
    expect(second.body).toEqual({ error_message: 'This login link is invalid, expired or already used' });
  });

  it('an expired login link is refused', async () => {
    const userId = await newUser('tok-login-expired');
    const url = (await api.call('get_login', key, { target_user: { user_id: userId } })).body.url as string;
    await api.app.get(DataSource).query(`UPDATE login_links SET expires_at = now() - interval '1 second' WHERE user_id = $1`, [userId]);
    expect((await api.raw().post('/api/client/login').send({ login_token: url.split('/#/login/')[1] })).status).toBe(401);
  });

  it('unknown users and tokens answer 400', async () => {
    for (const op of ['create_session_token', 'get_session_tokens', 'delete_session_tokens', 'get_login', 'logout_user']) {
      const res = await api.call(op, key, { target_user: { user_id: 'f'.repeat(32) } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error_message: `Invalid user_id (${'f'.repeat(32)})` });
    }
    for (const op of ['get_session_token', 'update_session_token', 'delete_session_token']) {
      const res = await api.call(op, key, { target_session_token: { session_token: 'nope' } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error_message: 'Invalid session_token (nope)' });
    }
    const missing = await api.call('get_session_token', key, {});
    expect(missing.status).toBe(400);
    expect(missing.body.error_message).toContain('target_session_token');
  });
});
