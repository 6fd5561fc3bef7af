import { DataSource } from 'typeorm';
import { JobProducer, QUEUES } from '@ws/queue';
import { insertWorkspaceRow } from './fixtures';
import type { RequestOf } from '@workspace-server/client';
import { HEX32, TestApi, TestKey, TIMESTAMP } from './harness';

describe('users, attributes and groups', () => {
  let api: TestApi;
  let admin: TestKey;
  let allUsersId: string;
  let administratorsId: string;

  beforeAll(async () => {
    api = await TestApi.start();
    admin = await api.key(['Global Admin']);
    const groups: Array<{ id: string; system_key: string }> = await api.app.get(DataSource).query('SELECT id, system_key FROM groups');
    allUsersId = groups.find((g) => g.system_key === 'all_users')!.id.replace(/-/g, '');
    administratorsId = groups.find((g) => g.system_key === 'administrators')!.id.replace(/-/g, '');
  });
  afterAll(async () => api?.close());

  const create = async (fields: RequestOf<'create_user'>['target_user']) => {
    const res = await api.op('create_user', admin, { target_user: fields });
    expect(res.status).toBe(200);
    return res.body.user as Record<string, unknown> & { user_id: string };
  };

  describe('create_user', () => {
    it('answers the user with every field of the spec, in All Users', async () => {
      const res = await api.op('create_user', admin, {
        target_user: { username: 'ada', first_name: 'Ada', last_name: 'Lovelace', phone: '+44 1', organization: 'Engines', locked: false, disabled: false, password: 'correct horse' },
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        user: {
          user_id: expect.stringMatching(HEX32), username: 'ada', first_name: 'Ada', last_name: 'Lovelace', phone: '+44 1', organization: 'Engines',
          notes: null, locked: false, disabled: false, realm: 'local', last_session: null, groups: [{ name: 'All Users', group_id: allUsersId }],
        },
      });
    });

    it('stores the password with bcrypt, never in clear', async () => {
      const user = await create({ username: 'hashme', password: 'hunter2hunter2' });
      const [row] = await api.app.get(DataSource).query('SELECT password_hash FROM users WHERE id = $1', [user.user_id]);
      expect(row.password_hash).toMatch(/^\$2[aby]\$10\$/);
    });

    it('refuses a duplicate username with 409', async () => {
      await create({ username: 'twice' });
      const res = await api.op('create_user', admin, { target_user: { username: 'twice' } });
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ error_message: 'Username (twice) is already taken' });
    });

    it.each([
      [{}, 'target_user should not be null or undefined'],
      [{ target_user: 'bob' }, 'target_user must be an object'],
      [{ target_user: {} }, 'target_user.username must be a string'],
      [{ target_user: { username: 42 } }, 'target_user.username must be a string'],
      [{ target_user: { username: 'x', locked: 'yes' } }, 'target_user.locked must be a boolean value'],
      [{ target_user: { username: 'x', locked: null } }, 'target_user.locked must be a boolean value'],
      [{ target_user: { username: '' } }, 'target_user.username must be longer than or equal to 1 characters'],
    ])('refuses %j with 400 naming the field', async (body, message) => {
      // Malformed on purpose: past the client's types, raw.
      const res = await api.call('create_user', admin, body);
      expect(res.status).toBe(400);
      expect(res.body.error_message).toContain(message);
    });
  });

  describe('get_user and get_users', () => {
    it('get_user by user_id and by username answers the detail fields', async () => {
      const user = await create({ username: 'grace', first_name: 'Grace' });
      const byId = await api.op('get_user', admin, { target_user: { user_id: user.user_id } });
      const byName = await api.op('get_user', admin, { target_user: { username: 'grace' } });
      expect(byId.status).toBe(200);
      expect(byName.body).toEqual(byId.body);
      expect(byId.body.user).toEqual({
        ...user, workspaces: [], two_factor: false, program_id: null, hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    });

    it('accepts a dashed UUID as user_id', async () => {
      const user = await create({ username: 'dashed' });
      const id = user.user_id;
      const dashed = `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20)}`;
      const res = await api.op('get_user', admin, { target_user: { user_id: dashed } });
      expect(res.body.user.user_id).toBe(id);
    });

    it('lists the user workspaces with their server', async () => {
      const user = await create({ username: 'has-workspace' });
      const workspace = await insertWorkspaceRow(api.app.get(DataSource), user.user_id);
      const res = await api.op('get_user', admin, { target_user: { user_id: user.user_id } });
      expect(res.body.user.workspaces).toEqual([
        {
          workspace_id: workspace.id.replace(/-/g, ''), start_date: expect.stringMatching(TIMESTAMP), keepalive_date: expect.stringMatching(TIMESTAMP),
          expiration_date: expect.stringMatching(TIMESTAMP), server: { server_id: workspace.serverId!.replace(/-/g, ''), hostname: expect.any(String), port: 35900 },
        },
      ]);
    });

    it('the hash changes when the password changes', async () => {
      const user = await create({ username: 'rehash', password: 'first-password' });
      const before = (await api.op('get_user', admin, { target_user: { user_id: user.user_id } })).body.user.hash;
      await api.op('update_user', admin, { target_user: { user_id: user.user_id, password: 'second-password' } });
      const after = (await api.op('get_user', admin, { target_user: { user_id: user.user_id } })).body.user.hash;
      expect(after).not.toBe(before);
    });

    it('unknown ids answer 400 Invalid user_id', async () => {
      for (const id of ['0'.repeat(32), 'not-an-id']) {
        const res = await api.op('get_user', admin, { target_user: { user_id: id } });
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error_message: `Invalid user_id (${id})` });
      }
      const res = await api.op('get_user', admin, { target_user: { username: 'nobody-here' } });
      expect(res.body).toEqual({ error_message: 'Invalid username (nobody-here)' });
    });

    it('get_users lists every user with workspaces and company', async () => {
      await create({ username: 'listed' });
      const res = await api.op('get_users', admin);
      expect(res.status).toBe(200);
      const item = res.body.users.find((u: { username: string }) => u.username === 'listed');
      expect(item).toEqual(expect.objectContaining({ username: 'listed', workspaces: [], company: null, groups: [{ name: 'All Users', group_id: allUsersId }] }));
      expect(item).not.toHaveProperty('hash');
    });
  });

  describe('update_user', () => {
    it('changes the supplied fields only, including locked and disabled', async () => {
      const user = await create({ username: 'changeme', first_name: 'Old', phone: '1' });
      const res = await api.op('update_user', admin, { target_user: { user_id: user.user_id, first_name: 'New', locked: true, disabled: true, phone: null } });
      expect(res.status).toBe(200);
      expect(res.body.user).toEqual({ ...user, first_name: 'New', locked: true, disabled: true, phone: null });
    });

    it('refuses a username taken by another user with 409', async () => {
      await create({ username: 'taken-name' });
      const user = await create({ username: 'wants-name' });
      const res = await api.op('update_user', admin, { target_user: { user_id: user.user_id, username: 'taken-name' } });
      expect(res.status).toBe(409);
    });

    it('refuses null for a field that cannot be empty', async () => {
      const user = await create({ username: 'no-null' });
      const res = await api.call('update_user', admin, { target_user: { user_id: user.user_id, username: null } });
      expect(res.status).toBe(400);
      expect(res.body.error_message).toContain('target_user.username must be a string');
    });

    it('modifying a Global Admin needs Users Modify Admin (rule 6)', async () => {
      const target = await create({ username: 'an-admin' });
      await api.op('add_user_group', admin, { target_user: { user_id: target.user_id }, target_group: { group_id: administratorsId } });
      const modifier = await api.key(['Users Modify', 'Users View']);
      const refused = await api.op('update_user', modifier, { target_user: { user_id: target.user_id, first_name: 'x' } });
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ error_message: 'Missing permissions (the target user is a Global Admin): Users Modify Admin' });
      const attrs = await api.op('update_user_attributes', modifier, { target_user_attributes: { user_id: target.user_id, show_tips: false } });
      expect(attrs.status).toBe(403);
      const adminModifier = await api.key(['Users Modify Admin', 'Users Modify', 'Users View']);
      expect((await api.op('update_user', adminModifier, { target_user: { user_id: target.user_id, first_name: 'x' } })).status).toBe(200);
      // Not a Global Admin: Users Modify suffices.
      const plain = await create({ username: 'not-admin' });
      expect((await api.op('update_user', modifier, { target_user: { user_id: plain.user_id, first_name: 'y' } })).status).toBe(200);
    });
  });

  describe('delete_user', () => {
    it('deletes a user without workspaces', async () => {
      const user = await create({ username: 'short-lived' });
      expect((await api.op('delete_user', admin, { target_user: { user_id: user.user_id } })).body).toEqual({});
      expect((await api.op('get_user', admin, { target_user: { user_id: user.user_id } })).status).toBe(400);
    });

    it('without force fails with 409 while the user has workspaces; with force the workspaces go first', async () => {
      const user = await create({ username: 'busy' });
      const workspace = await insertWorkspaceRow(api.app.get(DataSource), user.user_id);
      const refused = await api.op('delete_user', admin, { target_user: { user_id: user.user_id }, force: false });
      expect(refused.status).toBe(409);
      expect(refused.body.error_message).toMatch(/has 1 workspace/);
      const forced = await api.op('delete_user', admin, { target_user: { user_id: user.user_id }, force: true });
      expect(forced.status).toBe(200);
      const [row] = await api.app.get(DataSource).query('SELECT status, user_id, destroy_reason FROM workspaces WHERE id = $1', [workspace.id]);
      expect(row).toEqual({ status: 'stopping', user_id: null, destroy_reason: 'user_deleted' });
      const job = await api.app.get(JobProducer).queue(QUEUES.workspaces).getJob(`destroy-${workspace.id}`);
      expect(job?.data).toEqual({ workspaceId: workspace.id, reason: 'user_deleted' });
    });

    it('needs Sessions Delete when the target has running sessions (rule 3)', async () => {
      const user = await create({ username: 'running' });
      await insertWorkspaceRow(api.app.get(DataSource), user.user_id, 'running');
      const deleter = await api.key(['Users Delete', 'Users Modify', 'Users View']);
      const res = await api.op('delete_user', deleter, { target_user: { user_id: user.user_id }, force: true });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error_message: 'Missing permissions (the target user has running sessions): Sessions Delete, Sessions View' });
      const withSessions = await api.key(['Users Delete', 'Users Modify', 'Users View', 'Sessions Delete', 'Sessions View']);
      expect((await api.op('delete_user', withSessions, { target_user: { user_id: user.user_id }, force: true })).status).toBe(200);
    });

    it('needs Users Modify Admin to delete a Global Admin', async () => {
      const user = await create({ username: 'admin-to-delete' });
      await api.op('add_user_group', admin, { target_user: { user_id: user.user_id }, target_group: { group_id: administratorsId } });
      const deleter = await api.key(['Users Delete', 'Users Modify', 'Users View']);
      const res = await api.op('delete_user', deleter, { target_user: { user_id: user.user_id } });
      expect(res.status).toBe(403);
      expect(res.body.error_message).toContain('Users Modify Admin');
    });
  });

  describe('attributes', () => {
    it('get_attributes answers the defaults; update_user_attributes changes them', async () => {
      const user = await create({ username: 'attrs' });
      const before = await api.op('get_attributes', admin, { target_user: { user_id: user.user_id } });
      expect(before.body).toEqual({
        user_attributes: {
          user_attributes_id: expect.stringMatching(HEX32), user_id: user.user_id, ssh_public_key: null, show_tips: true,
          toggle_control_panel: true, chat_sfx: true, default_image: null, auto_login_workspace: null,
        },
      });
      const update = await api.op('update_user_attributes', admin, {
        target_user_attributes: { user_id: user.user_id, show_tips: false, toggle_control_panel: false, auto_login_workspace: true },
      });
      expect(update.status).toBe(200);
      expect(update.body).toEqual({});
      const after = await api.op('get_attributes', admin, { target_user: { user_id: user.user_id } });
      expect(after.body.user_attributes).toEqual({ ...before.body.user_attributes, show_tips: false, toggle_control_panel: false, auto_login_workspace: true });
    });

    it('refuses a default_image that names no image', async () => {
      const user = await create({ username: 'attrs-bad-image' });
      const res = await api.op('update_user_attributes', admin, { target_user_attributes: { user_id: user.user_id, default_image: '1'.repeat(32) } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error_message: `Invalid default_image (${'1'.repeat(32)})` });
    });
  });

  describe('groups', () => {
    it('adds and removes a member of a built-in group with Groups Modify System', async () => {
      const user = await create({ username: 'joiner' });
      const body = { target_user: { user_id: user.user_id }, target_group: { group_id: administratorsId } };
      expect((await api.op('add_user_group', admin, body)).body).toEqual({});
      const groups = (await api.op('get_user', admin, { target_user: { user_id: user.user_id } })).body.user.groups;
      expect(groups).toEqual([{ name: 'Administrators', group_id: administratorsId }, { name: 'All Users', group_id: allUsersId }]);
      expect((await api.op('remove_user_group', admin, body)).body).toEqual({});
      const after = (await api.op('get_user', admin, { target_user: { user_id: user.user_id } })).body.user.groups;
      expect(after).toEqual([{ name: 'All Users', group_id: allUsersId }]);
    });

    it('refuses built-in groups without Groups Modify System', async () => {
      const user = await create({ username: 'joiner2' });
      const key = await api.key(['Groups Modify', 'Groups View']);
      for (const op of ['add_user_group', 'remove_user_group'] as const) {
        const res = await api.op(op, key, { target_user: { user_id: user.user_id }, target_group: { group_id: allUsersId } });
        expect(res.status).toBe(403);
        expect(res.body).toEqual({ error_message: 'Missing permissions (All Users is a built-in group): Groups Modify System, Groups View System' });
      }
    });

    it('an unknown group is 400 Invalid group_id', async () => {
      const user = await create({ username: 'joiner3' });
      const res = await api.op('add_user_group', admin, { target_user: { user_id: user.user_id }, target_group: { group_id: 'abc' } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error_message: 'Invalid group_id (abc)' });
    });
  });
});
