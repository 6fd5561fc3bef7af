/**
 * The owner operations (issue 22, point 2): `user_id` is required, as the contract has it (no star). Missing, it
 * is a 400 naming the field, whatever the workspace; another user's id answers as an unknown workspace. Rows only:
 * the checks come before any container is asked.
 */
import { DataSource } from 'typeorm';
import { parseId, toWireId } from '@ws/common';
import { insertWorkspaceRow } from './fixtures';
import { TestApi, TestKey } from './harness';

const OWNER_OPERATIONS: Array<[string, Record<string, unknown>]> = [
  ['get_workspace_status', { skip_agent_check: true }],
  ['destroy_workspace', {}],
  ['get_workspace_screenshot', {}],
  ['get_workspace_frame_stats', {}],
  ['get_workspace_bottleneck_stats', {}],
  ['exec_command_workspace', { exec_config: { cmd: 'true' } }],
  ['get_rdp_client_connection_info', {}],
];

describe('owner operations require user_id', () => {
  let api: TestApi;
  let admin: TestKey;
  let owner: string;
  let stranger: string;
  let workspaceId: string;

  beforeAll(async () => {
    api = await TestApi.start();
    admin = await api.key(['Global Admin']);
    owner = (await api.call('create_user', admin, { target_user: { username: 'owner' } })).body.user.user_id;
    stranger = (await api.call('create_user', admin, { target_user: { username: 'stranger' } })).body.user.user_id;
    workspaceId = toWireId((await insertWorkspaceRow(api.app.get(DataSource), parseId(owner) as string)).id);
  });
  afterAll(async () => api?.close());

  it.each(OWNER_OPERATIONS)('%s without user_id is a 400 naming user_id, and nothing is done', async (operation, extra) => {
    for (const body of [{ workspace_id: workspaceId, ...extra }, { workspace_id: workspaceId, user_id: '', ...extra }, { workspace_id: workspaceId, user_id: 7, ...extra }]) {
      const res = await api.call(operation, admin, body);
      expect([operation, res.status]).toEqual([operation, 400]);
      expect(res.body.error_message).toMatch(/^user_id /);
    }
    const [row] = await api.app.get(DataSource).query('SELECT status FROM workspaces WHERE id = $1', [parseId(workspaceId)]);
    expect(row.status).toBe('running');
  });

  it.each(OWNER_OPERATIONS)("%s with another user's id answers as an unknown workspace", async (operation, extra) => {
    const res = await api.call(operation, admin, { workspace_id: workspaceId, user_id: stranger, ...extra });
    expect([res.status, res.body]).toEqual([400, { error_message: `Invalid workspace_id (${workspaceId})` }]);
  });

  it('the owner passes the check (get_workspace_status on the stored state)', async () => {
    const res = await api.call('get_workspace_status', admin, { workspace_id: workspaceId, user_id: owner, skip_agent_check: true });
    expect(res.status).toBe(200);
    expect(res.body.workspace.workspace_id).toBe(workspaceId);
  });

  it("port_map: the owner's has uploads; a view-only joiner's leaves out uploads and audio_input", async () => {
    const db = api.app.get(DataSource);
    await db.query(`UPDATE workspaces SET sharing_enabled = true WHERE id = $1`, [parseId(workspaceId)]);
    const owned = await api.call('get_workspace_status', admin, { workspace_id: workspaceId, user_id: owner, skip_agent_check: true });
    expect(Object.keys(owned.body.workspace.port_map).sort()).toEqual(['uploads', 'vnc']);
    const [{ share_id: shareId }] = await db.query('SELECT share_id FROM workspaces WHERE id = $1', [parseId(workspaceId)]);
    const joined = await api.call('join_workspace', admin, { share_id: shareId, user_id: stranger });
    expect(joined.status).toBe(200);
    expect(Object.keys(joined.body.workspace.port_map)).toEqual(['vnc']);
  });

  it('keepalive keeps its contract body: workspace_id alone', async () => {
    expect((await api.call('keepalive', admin, { workspace_id: workspaceId })).body).toEqual({ usage_reached: false });
  });
});
