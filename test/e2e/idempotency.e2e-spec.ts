import request from 'supertest';
import { DataSource } from 'typeorm';
import { parseId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { JobProducer } from '@ws/queue';
import { registerLocalServer } from './fixtures';
import { HEX32, TestApi, TestKey, waitFor } from './harness';

/** Issue 22, point 4: `Idempotency-Key` on creating operations. */
describe('Idempotency-Key', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  let other: TestKey;
  let imageId: string;

  beforeAll(async () => {
    // No worker: request_workspace records the workspace and enqueues its provision, which nothing runs here.
    api = await TestApi.start();
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
    other = await api.key(['Global Admin']);
    await registerLocalServer(api);
    const image = await api.app.get(ImagesService).upsert({ name: 'example/idempotency:1', friendlyName: 'Idempotency', cores: 1, memory: 512 * 1024 ** 2, portMap: { vnc: '5900/tcp' } });
    imageId = image.id.replace(/-/g, '');
  });
  afterAll(async () => api?.close());

  const withKey = (operation: string, key: TestKey, idempotencyKey: string, body: Record<string, unknown>) => api.call(operation, key, body).set('Idempotency-Key', idempotencyKey);
  const usersNamed = async (username: string) => Number((await db.query('SELECT count(*) AS n FROM users WHERE username = $1', [username]))[0].n);
  const newUser = async (username: string) => (await api.call('create_user', admin, { target_user: { username } })).body.user.user_id as string;

  it('the same key and body replays the first answer (status and body) and creates nothing', async () => {
    const first = await withKey('create_user', admin, 'replay-1', { target_user: { username: 'idem-ada', first_name: 'Ada' } });
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body.user.user_id).toMatch(HEX32);
    // The same body with its fields in another order, and the credentials as HTTP Basic instead: the same request.
    const again = await api.raw().post('/api/public/create_user').set('content-type', 'application/json').set('Idempotency-Key', 'replay-1')
      .auth(admin.api_key, admin.api_key_secret).send({ target_user: { first_name: 'Ada', username: 'idem-ada' } });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.text).toBe(first.text);
    expect(await usersNamed('idem-ada')).toBe(1);
  });

  it('the same key with a different body, or on another operation, is a 409 naming the key', async () => {
    expect((await withKey('create_user', admin, 'mismatch-1', { target_user: { username: 'idem-bob' } })).status).toBe(200);
    const changed = await withKey('create_user', admin, 'mismatch-1', { target_user: { username: 'idem-bobby' } });
    expect(changed.status).toBe(409);
    expect(changed.body.error_message).toContain('"mismatch-1"');
    expect(changed.body.error_message).toContain('Idempotency-Key');
    const elsewhere = await withKey('create_session_token', admin, 'mismatch-1', { target_user: { username: 'idem-bob' } });
    expect(elsewhere.status).toBe(409);
    expect(elsewhere.body.error_message).toContain('"mismatch-1"');
    expect(await usersNamed('idem-bobby')).toBe(0);
  });

  it('five concurrent request_workspace with one key make one workspace, and all get its answer', async () => {
    const userId = await newUser('idem-concurrent');
    const body = { user_id: userId, image_id: imageId };
    const answers = await Promise.all(Array.from({ length: 5 }, () => withKey('request_workspace', admin, 'launch-1', body)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    const ids = new Set(answers.map((a) => a.body.workspace_id as string));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(HEX32);
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === 'true')).toHaveLength(4);
    const rows = await db.query('SELECT count(*) AS n FROM workspaces WHERE user_id = $1', [parseId(userId)]);
    expect(Number(rows[0].n)).toBe(1);
    // A later retry replays it too.
    const later = await withKey('request_workspace', admin, 'launch-1', body);
    expect(later.body.workspace_id).toBe([...ids][0]);
  });

  it('every api replica sees the keys: concurrent requests on two replicas make one user', async () => {
    const replica = await api.replica();
    try {
      const body = { ...admin, target_user: { username: 'idem-replicas' } };
      const on = (server: unknown) => request(server as Parameters<typeof request>[0]).post('/api/public/create_user').set('content-type', 'application/json').set('Idempotency-Key', 'replicas-1').send(body);
      const answers = await Promise.all([on(api.app.getHttpServer()), on(replica.getHttpServer()), on(api.app.getHttpServer()), on(replica.getHttpServer())]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      expect(new Set(answers.map((a) => a.text)).size).toBe(1);
      expect(await usersNamed('idem-replicas')).toBe(1);
    } finally {
      await replica.close();
    }
  });

  it('keys are scoped to the API key: another key with the same Idempotency-Key runs its own request', async () => {
    const mine = await withKey('create_user', admin, 'shared-key', { target_user: { username: 'idem-mine' } });
    const theirs = await withKey('create_user', other, 'shared-key', { target_user: { username: 'idem-theirs' } });
    expect([mine.status, theirs.status]).toEqual([200, 200]);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(theirs.body.user.user_id).not.toBe(mine.body.user.user_id);
    expect(await usersNamed('idem-theirs')).toBe(1);
  });

  it('without the header two calls make two; with one key they make one', async () => {
    const userId = await newUser('idem-tokens');
    const body = { target_user: { user_id: userId } };
    const a = await api.call('create_session_token', admin, body);
    const b = await api.call('create_session_token', admin, body);
    expect(a.body.session_token.session_token).not.toBe(b.body.session_token.session_token);
    const c = await withKey('create_session_token', admin, 'token-1', body);
    const d = await withKey('create_session_token', admin, 'token-1', body);
    expect(d.body).toEqual(c.body);
    const list = await api.call('get_session_tokens', admin, body);
    expect(list.body.session_tokens).toHaveLength(3);
  });

  it('a refusal is stored and replayed too; a malformed key is a 400 naming the header; other operations ignore it', async () => {
    const refused = await withKey('create_user', admin, 'refused-1', { target_user: { username: 42 } });
    expect(refused.status).toBe(400);
    const again = await withKey('create_user', admin, 'refused-1', { target_user: { username: 42 } });
    expect(again.status).toBe(400);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(refused.body);
    // A corrected body is a new request: it needs a new key.
    expect((await withKey('create_user', admin, 'refused-1', { target_user: { username: 'idem-fixed' } })).status).toBe(409);

    for (const bad of ['has space', 'x'.repeat(256), 'caf\u00e9']) {
      const res = await api.raw().post('/api/public/create_user').set('content-type', 'application/json').set('Idempotency-Key', bad)
        .send({ ...admin, target_user: { username: 'idem-bad' } });
      expect(res.status).toBe(400);
      expect(res.body.error_message).toMatch(/^Idempotency-Key /);
    }
    expect(await usersNamed('idem-bad')).toBe(0);

    const listed = await withKey('get_users', admin, 'has space', {});
    expect(listed.status).toBe(200);
    expect(listed.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('Idempotency-Key waits, takeovers and expiry', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  let userId: string;

  beforeAll(async () => {
    api = await TestApi.start({ IDEMPOTENCY_WAIT_MS: 300 }, { worker: true });
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'idem-expiry' } })).body.user.user_id;
  });
  afterAll(async () => api?.close());

  const body = () => ({ target_user: { user_id: userId } });
  const mint = (idempotencyKey: string) => api.call('create_session_token', admin, body()).set('Idempotency-Key', idempotencyKey);
  const keyRows = async (key: string) => Number((await db.query('SELECT count(*) AS n FROM idempotency_keys WHERE key = $1', [key]))[0].n);

  it('a request whose first is still running waits, boundedly, then answers 409 "in progress"; an abandoned claim is taken over', async () => {
    const first = await mint('running-1');
    expect(first.status).toBe(200);
    // As if the first request had not answered yet.
    await db.query('UPDATE idempotency_keys SET status_code = NULL, response_body = NULL WHERE key = $1', ['running-1']);
    const waiting = await mint('running-1');
    expect(waiting.status).toBe(409);
    expect(waiting.body.error_message).toContain('"running-1"');
    expect(waiting.body.error_message).toContain('in progress');
    expect(waiting.headers['retry-after']).toBe('1');
    // Its process died long ago: the same request runs again and its answer is then replayed.
    await db.query(`UPDATE idempotency_keys SET claimed_at = now() - interval '10 minutes' WHERE key = $1`, ['running-1']);
    const rerun = await mint('running-1');
    expect(rerun.status).toBe(200);
    expect(rerun.headers['idempotent-replayed']).toBeUndefined();
    expect((await mint('running-1')).body).toEqual(rerun.body);
  });

  it('a key older than 24 hours replays nothing, and the worker job removes old keys', async () => {
    const old = await mint('old-1');
    const gone = await mint('old-2');
    const fresh = await mint('fresh-1');
    expect([old.status, gone.status, fresh.status]).toEqual([200, 200, 200]);
    await db.query(`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key IN ('old-1', 'old-2')`);
    // Past its 24 hours a key is new again, even before the job removed it.
    const renewed = await mint('old-1');
    expect(renewed.headers['idempotent-replayed']).toBeUndefined();
    expect(renewed.body.session_token.session_token).not.toBe(old.body.session_token.session_token);

    await api.app.get(JobProducer).enqueue('maintenance.expire-idempotency-keys', {});
    await waitFor('the expired key to be removed', async () => ((await keyRows('old-2')) === 0 ? true : undefined), 60_000, 100);
    expect(await keyRows('fresh-1')).toBe(1);
    expect(await keyRows('old-1')).toBe(1);
    expect((await mint('fresh-1')).headers['idempotent-replayed']).toBe('true');
  });
});
