import { DataSource } from 'typeorm';
import { ApiKeysService } from '@ws/auth';
import { TestApi } from './harness';

describe('authentication and permissions', () => {
  let api: TestApi;
  beforeAll(async () => (api = await TestApi.start({ MAX_BODY_BYTES: 4096 })));
  afterAll(async () => api?.close());

  describe('401', () => {
    it('refuses a request without credentials', async () => {
      const res = await api.call('get_users', null);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error_message: 'Missing api_key and api_key_secret' });
    });

    it('refuses an unknown key and a wrong secret with the same message', async () => {
      const key = await api.key(['Users View']);
      const wrongSecret = await api.call('get_users', { ...key, api_key_secret: 'x'.repeat(64) });
      const unknownKey = await api.call('get_users', { ...key, api_key: 'f'.repeat(32) });
      for (const res of [wrongSecret, unknownKey]) {
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ error_message: 'Invalid api_key or api_key_secret' });
      }
    });

    it('refuses non-string credentials', async () => {
      const res = await api.raw().post('/api/public/get_users').send({ api_key: 1, api_key_secret: ['x'] });
      expect(res.status).toBe(401);
      expect(res.body.error_message).toMatch(/must both be strings/);
    });

    it('refuses an expired key', async () => {
      const key = await api.key(['Users View'], { expiresAt: new Date(Date.now() - 1000) });
      const res = await api.call('get_users', key);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error_message: 'The API key has expired' });
    });

    it('accepts HTTP Basic credentials as well as the body', async () => {
      const key = await api.key(['Users View']);
      const res = await api.raw().post('/api/public/get_users').auth(key.api_key, key.api_key_secret).send({});
      expect(res.status).toBe(200);
      expect(res.body).toHaveProperty('users');
    });

    it('a revoked key stops working at once, even after it was cached', async () => {
      const key = await api.key(['Users View']);
      expect((await api.call('get_users', key)).status).toBe(200);
      await api.app.get(ApiKeysService).revoke(key.api_key);
      // The revocation arrives as a PostgreSQL notice; no request after revoke() may pass.
      const res = await api.call('get_users', key);
      expect(res.status).toBe(401);
    });

    it('a key changed by hand in SQL is re-read at once (change notices come from a trigger)', async () => {
      const key = await api.key(['Users View']);
      expect((await api.call('get_users', key)).status).toBe(200);
      await api.app.get(DataSource).query(`UPDATE api_keys SET permissions = '{}' WHERE api_key = $1`, [key.api_key]);
      // NOTIFY is delivered after commit; the next requests must see the change once it is delivered.
      let status = 0;
      for (let i = 0; i < 50 && status !== 403; i++) {
        status = (await api.call('get_users', key)).status;
        if (status !== 403) await new Promise((r) => setTimeout(r, 20));
      }
      expect(status).toBe(403);
    });
  });

  describe('403', () => {
    it('a new key with no permissions is refused and told what it lacks', async () => {
      const key = await api.key([]);
      const res = await api.call('get_users', key);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: 'Missing permissions: Users View' });
    });

    it('requires the dependencies of the operation permission (rule 1)', async () => {
      // Granted directly in SQL, bypassing the grant check, to prove the guard closes over dependencies too.
      const key = await api.key([]);
      await api.app.get(DataSource).query(`UPDATE api_keys SET permissions = '{"Users Create"}' WHERE api_key = $1`, [key.api_key]);
      const res = await api.call('create_user', key, { target_user: { username: 'dep-check' } });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: 'Missing permissions: Users View' });
    });

    it('needs both Users Auth Session and User to act as a user (rule 4 of Authentication)', async () => {
      for (const [held, missing] of [[['Users Auth Session'], 'User'], [['User'], 'Users Auth Session']] as const) {
        const key = await api.key([...held]);
        const res = await api.call('request_workspace', key, {});
        expect(res.status).toBe(403);
        expect(res.body).toEqual({ error_message: `Missing permissions: ${missing}` });
      }
    });

    it('delete_user needs Users Delete and, by rule 3, Users Modify', async () => {
      const key = await api.key([]);
      await api.app.get(DataSource).query(`UPDATE api_keys SET permissions = '{"Users Delete","Users View"}' WHERE api_key = $1`, [key.api_key]);
      const res = await api.call('delete_user', key, { target_user: { user_id: '0'.repeat(32) } });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: 'Missing permissions: Users Modify' });
    });

    it('a Read Only key may read but is refused every operation that writes', async () => {
      const key = await api.key(['Global Admin'], { readOnly: true });
      expect((await api.call('get_users', key)).status).toBe(200);
      const res = await api.call('create_user', key, { target_user: { username: 'ro' } });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: 'The API key is Read Only and create_user writes' });
      const token = await api.call('create_session_token', key, { target_user: { user_id: '0'.repeat(32) } });
      expect(token.status).toBe(403);
    });

    it('Global Admin holds every permission', async () => {
      const key = await api.key(['Global Admin']);
      const res = await api.call('create_user', key, { target_user: { username: 'by-admin' } });
      expect(res.status).toBe(200);
    });
  });

  describe('granting', () => {
    it('refuses a grant without its dependencies, naming them', async () => {
      await expect(api.app.get(ApiKeysService).create({ name: 'x', permissions: ['Users Delete'] })).rejects.toThrow(
        'Permissions Users Delete also need: Users Modify, Users View',
      );
    });
    it('refuses unknown permission names', async () => {
      await expect(api.app.get(ApiKeysService).create({ name: 'x', permissions: ['Users Fly'] })).rejects.toThrow('Unknown permissions: Users Fly');
    });
  });

  describe('malformed requests', () => {
    it('answers 400 for a body that is not JSON, or not an object', async () => {
      for (const body of ['{oops', '[1]', '"text"']) {
        const res = await api.raw().post('/api/public/get_users').set('content-type', 'application/json').send(body);
        expect(res.status).toBe(400);
        expect(typeof res.body.error_message).toBe('string');
      }
    });
    it('reads JSON whatever the content type says', async () => {
      const key = await api.key(['Users View']);
      const res = await api.raw().post('/api/public/get_users').set('content-type', 'application/x-www-form-urlencoded').send(JSON.stringify(key));
      expect(res.status).toBe(200);
    });
    it('answers 413 for an oversized body', async () => {
      const res = await api.raw().post('/api/public/get_users').set('content-type', 'application/json').send(JSON.stringify({ pad: 'x'.repeat(10_000) }));
      expect(res.status).toBe(413);
      expect(res.body).toEqual({ error_message: 'Request body is too large' });
    });
    it('answers 404 for an unknown operation', async () => {
      const res = await api.call('make_coffee', null);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error_message: 'Unknown operation' });
    });
  });
});
