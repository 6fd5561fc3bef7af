/**
 * Paged lists (issue 22, point 6): `limit` (1–1000) and an opaque `cursor`, keyset order, `next_cursor` only when
 * a page is asked for. Rows only (no containers).
 */
import { DataSource } from 'typeorm';
import { parseId, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ZonesService } from '@ws/zones';
import { insertWorkspaceRow } from './fixtures';
import { TestApi, TestKey } from './harness';

interface ListCase {
  operation: string;
  field: string;
  id: string;
  body?: () => Record<string, unknown>;
}

describe('paged lists', () => {
  let api: TestApi;
  let admin: TestKey;
  let tokenUser: string;

  const LISTS: ListCase[] = [
    { operation: 'get_users', field: 'users', id: 'user_id' },
    { operation: 'get_workspaces', field: 'workspaces', id: 'workspace_id' },
    { operation: 'get_images', field: 'images', id: 'image_id' },
    { operation: 'get_cast_configs', field: 'cast_configs', id: 'cast_config_id' },
    { operation: 'get_staging_configs', field: 'staging_configs', id: 'staging_config_id' },
    { operation: 'get_session_tokens', field: 'session_tokens', id: 'session_token', body: () => ({ target_user: { user_id: tokenUser } }) },
    { operation: 'get_webhooks', field: 'webhooks', id: 'webhook_id' },
  ];

  const newUser = async (username: string): Promise<string> => {
    const res = await api.call('create_user', admin, { target_user: { username } });
    expect(res.status).toBe(200);
    return res.body.user.user_id;
  };

  /** Every page of the list with `limit`, bounded in count; answers the ids in order and the answers themselves. */
  async function walk(list: ListCase, limit: number, maxPages = 200): Promise<{ ids: string[]; pages: number }> {
    const ids: string[] = [];
    let cursor: string | null = null;
    for (let pages = 1; pages <= maxPages; pages++) {
      const res = await api.call(list.operation, admin, { ...(list.body?.() ?? {}), limit, ...(cursor ? { cursor } : {}) });
      expect([list.operation, res.status]).toEqual([list.operation, 200]);
      const items = res.body[list.field] as Array<Record<string, string>>;
      expect(items.length).toBeLessThanOrEqual(limit);
      ids.push(...items.map((item) => item[list.id]));
      expect(res.body).toHaveProperty('next_cursor');
      cursor = res.body.next_cursor;
      if (cursor === null) return { ids, pages };
      expect(typeof cursor).toBe('string');
    }
    throw new Error(`${list.operation}: more than ${maxPages} pages`);
  }

  beforeAll(async () => {
    api = await TestApi.start({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: true });
    admin = await api.key(['Global Admin']);
    const db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    const images = api.app.get(ImagesService);
    tokenUser = await newUser('token-holder');
    for (let i = 0; i < 7; i++) {
      const user = await newUser(`paged-${i}`);
      await insertWorkspaceRow(db, parseId(user) as string);
      const image = await images.upsert({ name: 'example/desktop:1', friendlyName: `Paged ${String.fromCharCode(90 - i)}`, portMap: { vnc: '5900/tcp' } });
      expect((await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: `Cast ${i}`, image_id: toWireId(image.id), key: `paged-${i}`, allow_anonymous: true } })).status).toBe(200);
      expect((await api.call('create_staging_config', admin, { target_staging_config: { zone_id: toWireId(zone.id), image_id: toWireId(image.id), num_sessions: 0, expiration: 1 } })).status).toBe(200);
      expect((await api.call('create_session_token', admin, { target_user: { user_id: tokenUser } })).status).toBe(200);
      expect((await api.call('create_webhook', admin, { target_webhook: { url: `http://127.0.0.1:9/paged-${i}`, events: [] } })).status).toBe(200);
    }
  });
  afterAll(async () => api?.close());

  it.each([1, 2, 3, 1000])('each list pages with limit %i: every item once, nothing more, the last page says null', async (limit) => {
    for (const list of LISTS) {
      const whole = await api.call(list.operation, admin, list.body?.() ?? {});
      expect(whole.status).toBe(200);
      // Without limit the answer is the contract's: no next_cursor.
      expect(whole.body).not.toHaveProperty('next_cursor');
      const all = (whole.body[list.field] as Array<Record<string, string>>).map((item) => item[list.id]);
      expect([list.operation, all.length >= 7]).toEqual([list.operation, true]);
      const { ids, pages } = await walk(list, limit);
      expect([list.operation, new Set(ids).size]).toEqual([list.operation, ids.length]);
      expect([list.operation, [...ids].sort()]).toEqual([list.operation, [...all].sort()]);
      // A full last page already says null: no empty page at the end.
      expect([list.operation, pages]).toEqual([list.operation, Math.ceil(all.length / limit)]);
    }
  });

  it('pages are in creation order, the same order as the unpaged users and cast configs', async () => {
    for (const list of LISTS.filter((l) => ['get_users', 'get_cast_configs', 'get_staging_configs', 'get_webhooks'].includes(l.operation))) {
      const all = ((await api.call(list.operation, admin, {})).body[list.field] as Array<Record<string, string>>).map((item) => item[list.id]);
      expect([list.operation, (await walk(list, 2)).ids]).toEqual([list.operation, all]);
    }
  });

  it('a walk of all users while users are created sees every user that existed at its start, once', async () => {
    const before = ((await api.call('get_users', admin)).body.users as Array<{ user_id: string }>).map((u) => u.user_id);
    for (let i = 0; i < 20; i++) await newUser(`walk-seed-${i}`);
    const existing = ((await api.call('get_users', admin)).body.users as Array<{ user_id: string }>).map((u) => u.user_id);
    expect(existing.length).toBe(before.length + 20);
    let creating = true;
    const created: string[] = [];
    const creator = (async () => {
      for (let i = 0; creating && i < 200; i++) created.push(await newUser(`walk-new-${i}`));
    })();
    let walked: string[];
    try {
      walked = (await walk(LISTS[0], 3)).ids;
    } finally {
      creating = false;
      await creator;
    }
    expect(created.length).toBeGreaterThan(0);
    expect(new Set(walked).size).toBe(walked.length);
    expect(existing.filter((id) => !walked.includes(id))).toEqual([]);
    expect(walked.filter((id) => !existing.includes(id) && !created.includes(id))).toEqual([]);
  });

  it('a limit outside 1–1000 or not an integer is a 400 naming limit', async () => {
    for (const list of LISTS) {
      for (const limit of [0, -1, 1001, 1.5, '5', true]) {
        const res = await api.call(list.operation, admin, { ...(list.body?.() ?? {}), limit });
        expect([list.operation, limit, res.status]).toEqual([list.operation, limit, 400]);
        expect(res.body.error_message).toMatch(/^limit /);
      }
    }
  });

  it("a malformed cursor, or another list's, is a 400 naming cursor", async () => {
    const usersCursor = (await api.call('get_users', admin, { limit: 1 })).body.next_cursor as string;
    expect(typeof usersCursor).toBe('string');
    const forged = Buffer.from(JSON.stringify(['users', 'yesterday', 'me'])).toString('base64url');
    for (const list of LISTS) {
      const bad: unknown[] = ['not a cursor', '', 42, forged, Buffer.from('[').toString('base64url')];
      if (list.operation !== 'get_users') bad.push(usersCursor);
      for (const cursor of bad) {
        const res = await api.call(list.operation, admin, { ...(list.body?.() ?? {}), limit: 2, cursor });
        expect([list.operation, cursor, res.status]).toEqual([list.operation, cursor, 400]);
        expect(res.body.error_message).toMatch(/^cursor /);
      }
    }
    // A cursor alone continues with the default page size (100).
    const next = await api.call('get_users', admin, { cursor: usersCursor });
    expect(next.status).toBe(200);
    expect(next.body).toHaveProperty('next_cursor');
    expect(next.body.users.length).toBeGreaterThan(0);
    expect(next.body.users.length).toBeLessThanOrEqual(100);
  });
});
