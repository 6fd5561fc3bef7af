/**
 * Egress credentials over HTTP (update_egress_credential, delete_egress_provider_mapping): every validation
 * branch, both names of the limit and of the id, masking, the conditional permissions by what a credential is
 * attached to (before and after a change); EgressConnections.reserve/release against the real database,
 * including the limit under concurrent launches; the operator CLI's egress commands; secrets encrypted at rest
 * (the columns in PostgreSQL, the migration that seals rows stored in clear and its down).
 */
import { DataSource } from 'typeorm';
import { closure, Permission } from '@ws/auth';
import { newId, parseId, SecretCipher, toWireId } from '@ws/common';
import { EgressCatalog, EgressConnections, EgressCredential, EgressGateway, EgressProvider, EgressSecrets } from '@ws/egress';
import { EncryptEgressSecrets1795818451034 } from '../../migrations/1795818451034-EncryptEgressSecrets';
import { runCli as cli, runCliWithStdin as cliWithStdin, useApiForCli } from './cli-runner';
import { HEX32, TestApi, TestKey } from './harness';

const BASE: Permission[] = ['Egress Credentials Create', 'Egress Credentials Modify', 'Egress Credentials Delete', 'Egress Providers Modify'];
const MASK = '********';
const CREDENTIALS_KEY = 'egress-e2e-key-0123456789abcdef0123456789';

describe('egress credentials', () => {
  let api: TestApi;
  let db: DataSource;
  let admin: TestKey;
  let restoreEnv: () => Promise<void> = async () => undefined;
  const keys = new Map<string, TestKey>();

  let vpn: EgressProvider;
  let tunnel: EgressProvider;
  let mesh: EgressProvider;
  let custom: EgressProvider;
  let gwA: EgressGateway;
  let gwB: EgressGateway;
  let gwT: EgressGateway;
  let gwM: EgressGateway;
  const ids = { user: '', adminUser: '', group: '', systemGroup: '', image: '', otherImage: '' };

  /** A key holding BASE plus `extra`, closed over their dependencies (as a grant must be). */
  async function keyWith(extra: Permission[] = []): Promise<TestKey> {
    const name = [...extra].sort().join('|');
    const known = keys.get(name);
    if (known) return known;
    const key = await api.key([...closure([...BASE, ...extra])]);
    keys.set(name, key);
    return key;
  }

  const update = (key: TestKey, target: Record<string, unknown>) => api.call('update_egress_credential', key, { target_egress_credential: target });
  const remove = (key: TestKey, target: Record<string, unknown>) => api.call('delete_egress_provider_mapping', key, { target_egress_credential: target });

  /** A valid new credential of the VPN provider attached to `owner` (one of user_id, group_id, image_id). */
  const vpnCredential = (owner: Record<string, string>, more: Record<string, unknown> = {}) => ({
    egress_provider_id: toWireId(vpn.id), name: 'office vpn', username: 'alice', password: 'pa55word', allow_all_gateways: true, ...owner, ...more,
  });

  async function created(target: Record<string, unknown>): Promise<Record<string, unknown>> {
    const res = await update(admin, target);
    expect(res.status).toBe(200);
    return res.body.egress_credentials[0] as Record<string, unknown>;
  }

  /** The credential with its secrets in clear, after checking that PostgreSQL holds none of them in clear. */
  async function stored(wireId: unknown): Promise<EgressCredential> {
    const id = parseId(wireId) as string;
    const [raw] = (await db.query('SELECT password, vpn_private_key, mesh_key, custom_credential FROM egress_credentials WHERE id = $1', [id])) as Array<Record<string, string | null>>;
    for (const value of Object.values(raw)) if (value !== null) expect(SecretCipher.isSealed(value)).toBe(true);
    const clear = api.app.get(EgressSecrets).reveal(await db.getRepository(EgressCredential).findOneByOrFail({ id }));
    for (const [column, value] of Object.entries(raw)) if (value !== null) expect(value).not.toContain(clear[({ password: 'password', vpn_private_key: 'vpnPrivateKey', mesh_key: 'meshKey', custom_credential: 'customCredential' } as const)[column as 'password']] as string);
    return clear;
  }

  beforeAll(async () => {
    // More connections than the concurrent launches of the limit test, so all of them are in flight at once.
    // The CLI (in process) and the migration read the key from the environment, the api from its settings.
    process.env.SERVER_CREDENTIALS_KEY = CREDENTIALS_KEY;
    api = await TestApi.start({ DATABASE_POOL_SIZE: 14, SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY });
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
    restoreEnv = useApiForCli(api);

    const catalog = api.app.get(EgressCatalog);
    vpn = await catalog.createProvider('corp-vpn', 'username_password_vpn');
    tunnel = await catalog.createProvider('wg', 'key_pair_tunnel');
    mesh = await catalog.createProvider('mesh', 'mesh_network');
    custom = await catalog.createProvider('other', 'custom');
    gwA = await catalog.createGateway('corp-vpn', { name: 'gw-a', endpoint: 'vpn-a.example.com:1194', config: { proto: 'udp' } });
    gwB = await catalog.createGateway('corp-vpn', { name: 'gw-b', endpoint: 'vpn-b.example.com:1194' });
    gwT = await catalog.createGateway('wg', { name: 'gw-t', endpoint: '203.0.113.7:51820', config: { peer_public_key: 'abc=' } });
    gwM = await catalog.createGateway('mesh', { name: 'exit-1' });

    const user = await api.call('create_user', admin, { target_user: { username: 'egress-user' } });
    ids.user = user.body.user.user_id;
    const adminUser = await api.call('create_user', admin, { target_user: { username: 'egress-admin' } });
    ids.adminUser = adminUser.body.user.user_id;
    const [administrators] = (await db.query(`SELECT id FROM groups WHERE system_key = 'administrators'`)) as Array<{ id: string }>;
    await db.query('INSERT INTO user_groups (user_id, group_id) VALUES ($1, $2)', [parseId(ids.adminUser), administrators.id]);
    const [allUsers] = (await db.query(`SELECT id FROM groups WHERE system_key = 'all_users'`)) as Array<{ id: string }>;
    ids.systemGroup = toWireId(allUsers.id);
    const groupId = newId();
    await db.query('INSERT INTO groups (id, name) VALUES ($1, $2)', [groupId, 'egress-team']);
    await db.query('INSERT INTO user_groups (user_id, group_id) VALUES ($1, $2)', [parseId(ids.user), groupId]);
    ids.group = toWireId(groupId);
    for (const key of ['image', 'otherImage'] as const) {
      const id = newId();
      await db.query('INSERT INTO images (id, name, friendly_name) VALUES ($1, $2, $3)', [id, 'example/desktop:1', `egress ${key}`]);
      ids[key] = toWireId(id);
    }
  });

  afterAll(async () => {
    await restoreEnv();
    await api?.close();
  });

  describe('update_egress_credential', () => {
    it('creates a credential without egress_credential_id and answers the spec shape, secrets masked', async () => {
      const res = await update(admin, vpnCredential({ user_id: ids.user }));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        egress_credentials: [{
          egress_credential_id: expect.stringMatching(HEX32), name: 'office vpn', username: 'alice', password: MASK, enabled: true,
          user_id: ids.user, group_id: null, image_id: null, egress_provider_id: toWireId(vpn.id), allow_all_gateways: true,
          vpn_private_key: null, mesh_key: null, custom_credential: null, limit_active_connections: false, active_connection_limit: 0, active_connections: 0,
          egress_provider: { egress_provider_id: toWireId(vpn.id), name: 'corp-vpn', egress_provider_type: 'username_password_vpn' },
          egress_gateways: [{ name: 'gw-a', egress_gateway_id: toWireId(gwA.id) }, { name: 'gw-b', egress_gateway_id: toWireId(gwB.id) }],
        }],
      });
      expect((await stored(res.body.egress_credentials[0].egress_credential_id)).password).toBe('pa55word');
    });

    it('changes the fields given, keeps the others; a masked secret sent back keeps the stored one', async () => {
      const first = await created(vpnCredential({ group_id: ids.group }));
      const res = await update(admin, { ...first, name: 'renamed', allow_all_gateways: false, selected_gateways: [toWireId(gwB.id)], active_connections: undefined });
      expect(res.status).toBe(200);
      const [changed] = res.body.egress_credentials;
      expect(changed).toEqual({ ...first, name: 'renamed', allow_all_gateways: false, egress_gateways: [{ name: 'gw-b', egress_gateway_id: toWireId(gwB.id) }] });
      expect((await stored(first.egress_credential_id)).password).toBe('pa55word');

      const password = await update(admin, { egress_credential_id: first.egress_credential_id, password: 'n3w' });
      expect(password.body.egress_credentials[0].password).toBe(MASK);
      expect((await stored(first.egress_credential_id)).password).toBe('n3w');
      // A masked value where nothing is stored cannot be kept: the secret itself is needed.
      const nothingStored = await update(admin, { egress_credential_id: first.egress_credential_id, mesh_key: MASK });
      expect(nothingStored.status).toBe(400);
      expect(nothingStored.body.error_message).toMatch(/mesh_key is only asterisks \(a masked value\) and none is stored/);
      // Dashed ids are accepted too.
      const dashed = await update(admin, { egress_credential_id: parseId(first.egress_credential_id), enabled: false });
      expect(dashed.body.egress_credentials[0]).toEqual(expect.objectContaining({ egress_credential_id: first.egress_credential_id, enabled: false }));
    });

    it('answers username and password as strings and the limit as an integer; the answer sent back changes nothing', async () => {
      const key = await created({ egress_provider_id: toWireId(tunnel.id), name: 'typed', vpn_private_key: 'wg-secret', user_id: ids.user, allow_all_gateways: true });
      expect(key).toEqual(expect.objectContaining({ username: '', password: '', vpn_private_key: MASK, mesh_key: null, limit_active_connections: false, active_connection_limit: 0 }));
      const { active_connections: _live, ...sentBack } = key;
      const again = await update(admin, sentBack);
      expect(again.status).toBe(200);
      expect(again.body.egress_credentials[0]).toEqual(key);
      expect((await stored(key.egress_credential_id)).vpnPrivateKey).toBe('wg-secret');
      // An empty secret is no secret: stored as null, answered "" (password) or null.
      const emptied = await update(admin, { egress_credential_id: key.egress_credential_id, custom_credential: '', username: 'u' });
      expect(emptied.body.egress_credentials[0]).toEqual(expect.objectContaining({ username: 'u', password: '', custom_credential: null }));
    });

    it('stores every secret only encrypted, bound to its credential and column; without SERVER_CREDENTIALS_KEY a secret is refused', async () => {
      const made = await created({ egress_provider_id: toWireId(custom.id), name: 'sealed', custom_credential: 'opaque-123', password: 'pw-456', username: 'carl', group_id: ids.group, allow_all_gateways: true });
      const [raw] = (await db.query('SELECT username, password, custom_credential FROM egress_credentials WHERE id = $1', [parseId(made.egress_credential_id)])) as Array<Record<string, string>>;
      expect(raw.username).toBe('carl');
      expect(SecretCipher.isSealed(raw.password) && SecretCipher.isSealed(raw.custom_credential)).toBe(true);
      expect(JSON.stringify(raw)).not.toMatch(/opaque-123|pw-456/);
      expect(await stored(made.egress_credential_id)).toEqual(expect.objectContaining({ customCredential: 'opaque-123', password: 'pw-456' }));
      // A value copied onto another column does not open.
      const secrets = api.app.get(EgressSecrets);
      const entity = await db.getRepository(EgressCredential).findOneByOrFail({ id: parseId(made.egress_credential_id) as string });
      expect(() => secrets.reveal({ ...entity, meshKey: raw.custom_credential } as EgressCredential)).toThrow(/does not decrypt with SERVER_CREDENTIALS_KEY/);
      // Another key opens nothing, and none refuses to store one (400 naming the setting).
      const other = new EgressSecrets(Object.assign(Object.create(api.config) as typeof api.config, { SERVER_CREDENTIALS_KEY: 'x'.repeat(32) }));
      expect(() => other.reveal(entity)).toThrow(/does not decrypt/);
      const keyless = new EgressSecrets(Object.assign(Object.create(api.config) as typeof api.config, { SERVER_CREDENTIALS_KEY: '' }));
      expect(() => keyless.seal(entity.id, 'password', 'pw')).toThrow(/SERVER_CREDENTIALS_KEY is not set: egress credentials' secrets are stored only encrypted/);
    });

    it('the migration seals secrets stored in clear (once), and its down opens them again', async () => {
      const id = newId();
      await db.query(
        `INSERT INTO egress_credentials (id, name, provider_id, username, password, custom_credential, mesh_key, image_id, allow_all_gateways)
         VALUES ($1, 'legacy', $2, 'lee', 'legacy-pw', 'legacy-custom', '', $3, true)`,
        [id, custom.id, parseId(ids.otherImage)],
      );
      const read = async () => ((await db.query('SELECT username, password, custom_credential, mesh_key, vpn_private_key FROM egress_credentials WHERE id = $1', [id])) as Array<Record<string, string | null>>)[0];
      const migration = new EncryptEgressSecrets1795818451034();
      const runner = db.createQueryRunner();
      try {
        await migration.up(runner);
        const sealed = await read();
        expect(sealed).toEqual(expect.objectContaining({ username: 'lee', mesh_key: null, vpn_private_key: null }));
        expect(SecretCipher.isSealed(sealed.password as string) && SecretCipher.isSealed(sealed.custom_credential as string)).toBe(true);
        expect(await stored(toWireId(id))).toEqual(expect.objectContaining({ password: 'legacy-pw', customCredential: 'legacy-custom' }));
        await migration.up(runner); // a second run leaves sealed values alone
        expect(await read()).toEqual(sealed);

        await migration.down(runner);
        expect(await read()).toEqual(expect.objectContaining({ password: 'legacy-pw', custom_credential: 'legacy-custom' }));
        // Without the key, rows holding secrets stop the migration with the variable's name.
        delete process.env.SERVER_CREDENTIALS_KEY;
        await expect(migration.up(runner)).rejects.toThrow(/SERVER_CREDENTIALS_KEY is not set: \d+ egress credential\(s\) hold secrets/);
        process.env.SERVER_CREDENTIALS_KEY = CREDENTIALS_KEY;
        await migration.up(runner);
        expect(await stored(toWireId(id))).toEqual(expect.objectContaining({ password: 'legacy-pw', customCredential: 'legacy-custom' }));
      } finally {
        process.env.SERVER_CREDENTIALS_KEY = CREDENTIALS_KEY;
        await runner.release();
      }
    });

    it('accepts the limit as active_connection_limit or active_connections; both different is refused', async () => {
      const first = await created(vpnCredential({ image_id: ids.image }));
      const id = first.egress_credential_id;
      const byLimit = await update(admin, { egress_credential_id: id, limit_active_connections: true, active_connection_limit: 4 });
      expect(byLimit.body.egress_credentials[0]).toEqual(expect.objectContaining({ limit_active_connections: true, active_connection_limit: 4, active_connections: 0 }));
      const byAlias = await update(admin, { egress_credential_id: id, active_connections: 2 });
      expect(byAlias.body.egress_credentials[0]).toEqual(expect.objectContaining({ limit_active_connections: true, active_connection_limit: 2 }));
      const both = await update(admin, { egress_credential_id: id, active_connection_limit: 3, active_connections: 3 });
      expect(both.body.egress_credentials[0].active_connection_limit).toBe(3);
      const differ = await update(admin, { egress_credential_id: id, active_connection_limit: 3, active_connections: 5 });
      expect(differ.status).toBe(400);
      expect(differ.body.error_message).toMatch(/active_connection_limit and .*active_connections .*differ/);
      // Switching the limit off keeps the number for later.
      const off = await update(admin, { egress_credential_id: id, limit_active_connections: false });
      expect(off.body.egress_credentials[0]).toEqual(expect.objectContaining({ limit_active_connections: false, active_connection_limit: 3 }));
    });

    it('requires the credential field of each provider type', async () => {
      const cases: Array<[EgressProvider, Record<string, unknown>, RegExp]> = [
        [vpn, { username: 'bob' }, /password is required for the username_password_vpn provider/],
        [vpn, { password: 'x' }, /username is required for the username_password_vpn provider/],
        [vpn, {}, /username and password are required/],
        [tunnel, {}, /vpn_private_key is required for the key_pair_tunnel provider/],
        [mesh, {}, /mesh_key is required for the mesh_network provider/],
        [custom, {}, /custom_credential is required for the custom provider/],
      ];
      for (const [provider, fields, message] of cases) {
        const res = await update(admin, { egress_provider_id: toWireId(provider.id), name: 'n', allow_all_gateways: true, user_id: ids.user, ...fields });
        expect({ provider: provider.name, fields, status: res.status, message: res.body.error_message }).toEqual({ provider: provider.name, fields, status: 400, message: expect.stringMatching(message) });
      }
      const ok: Array<[EgressProvider, Record<string, unknown>, string]> = [
        [tunnel, { vpn_private_key: 'wg-private' }, 'vpn_private_key'],
        [mesh, { mesh_key: 'tskey-abc' }, 'mesh_key'],
        [custom, { custom_credential: 'token' }, 'custom_credential'],
      ];
      for (const [provider, fields, field] of ok) {
        const body = await created({ egress_provider_id: toWireId(provider.id), name: 'n', allow_all_gateways: true, user_id: ids.user, ...fields });
        expect(body[field]).toBe(MASK);
      }
      // Changing the provider checks the new type's field against the merged credential.
      const first = await created(vpnCredential({ user_id: ids.user }));
      const switched = await update(admin, { egress_credential_id: first.egress_credential_id, egress_provider_id: toWireId(tunnel.id) });
      expect(switched.status).toBe(400);
      expect(switched.body.error_message).toMatch(/vpn_private_key is required for the key_pair_tunnel provider wg/);
      const withKey = await update(admin, { egress_credential_id: first.egress_credential_id, egress_provider_id: toWireId(tunnel.id), vpn_private_key: 'k' });
      expect(withKey.body.egress_credentials[0].egress_gateways).toEqual([{ name: 'gw-t', egress_gateway_id: toWireId(gwT.id) }]);
    });

    it('requires selected_gateways of the same provider when allow_all_gateways is false', async () => {
      const base = { egress_provider_id: toWireId(vpn.id), name: 'n', username: 'u', password: 'p', user_id: ids.user };
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{}, /selected_gateways .*is required when allow_all_gateways is false/],
        [{ allow_all_gateways: false }, /selected_gateways .*is required when allow_all_gateways is false/],
        [{ allow_all_gateways: false, selected_gateways: [] }, /selected_gateways .*is required when allow_all_gateways is false/],
        [{ allow_all_gateways: false, selected_gateways: [toWireId(gwT.id)] }, /gateway .* \(gw-t\) is not a gateway of the provider corp-vpn/],
        [{ allow_all_gateways: false, selected_gateways: [toWireId(newId())] }, /^Invalid egress_gateway_id \([0-9a-f]{32}\)$/],
        [{ allow_all_gateways: false, selected_gateways: ['gw-a'] }, /^Invalid egress_gateway_id \(gw-a\)$/],
        [{ allow_all_gateways: false, selected_gateways: 'gw-a' }, /selected_gateways must be an array/],
        [{ allow_all_gateways: false, selected_gateways: [7] }, /selected_gateways/],
      ];
      for (const [fields, message] of cases) {
        const res = await update(admin, { ...base, ...fields });
        expect({ fields, status: res.status, message: res.body.error_message }).toEqual({ fields, status: 400, message: expect.stringMatching(message) });
      }
      const ok = await created({ ...base, allow_all_gateways: false, selected_gateways: [toWireId(gwA.id), parseId(toWireId(gwA.id))] });
      expect(ok.egress_gateways).toEqual([{ name: 'gw-a', egress_gateway_id: toWireId(gwA.id) }]);
      // A provider change leaves the stored selection foreign: it must be given again.
      const moved = await update(admin, { egress_credential_id: ok.egress_credential_id, egress_provider_id: toWireId(tunnel.id), vpn_private_key: 'k' });
      expect(moved.status).toBe(400);
      expect(moved.body.error_message).toMatch(/selected_gateways is required: the stored gateways belong to the credential's previous provider/);
      const again = await update(admin, { egress_credential_id: ok.egress_credential_id, egress_provider_id: toWireId(tunnel.id), vpn_private_key: 'k', selected_gateways: [toWireId(gwT.id)] });
      expect(again.body.egress_credentials[0].egress_gateways).toEqual([{ name: 'gw-t', egress_gateway_id: toWireId(gwT.id) }]);
    });

    it('requires a positive integer limit when limit_active_connections is true', async () => {
      const base = vpnCredential({ user_id: ids.user }, { limit_active_connections: true });
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{}, /active_connection_limit \(a positive integer\) is required when limit_active_connections is true/],
        // 0 is what an answer carries when no limit is stored: as absent as null.
        [{ active_connection_limit: 0 }, /active_connection_limit \(a positive integer\) is required when limit_active_connections is true/],
        [{ active_connection_limit: -1 }, /active_connection_limit must not be less than 0/],
        [{ active_connections: -2 }, /active_connections must not be less than 1/],
        [{ active_connection_limit: 1.5 }, /active_connection_limit must be an integer/],
        [{ active_connection_limit: '3' }, /active_connection_limit must be an integer/],
        [{ active_connection_limit: null }, /active_connection_limit/],
        [{ limit_active_connections: 'yes', active_connection_limit: 2 }, /limit_active_connections must be a boolean/],
      ];
      for (const [fields, message] of cases) {
        const res = await update(admin, { ...base, ...fields });
        expect({ fields, status: res.status, message: res.body.error_message }).toEqual({ fields, status: 400, message: expect.stringMatching(message) });
      }
    });

    it('requires exactly one of user_id, group_id, image_id, each naming something', async () => {
      const base = vpnCredential({});
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{}, /exactly one of user_id, group_id and image_id must be given/],
        [{ user_id: null }, /exactly one of user_id, group_id and image_id/],
        [{ user_id: ids.user, group_id: ids.group }, /exactly one of .*; got user_id, group_id/],
        [{ user_id: ids.user, group_id: ids.group, image_id: ids.image }, /got user_id, group_id, image_id/],
        [{ user_id: toWireId(newId()) }, /^Invalid user_id \([0-9a-f]{32}\)$/],
        [{ group_id: 'nope' }, /^Invalid group_id \(nope\)$/],
        [{ image_id: toWireId(newId()) }, /^Invalid image_id/],
        [{ user_id: '' }, /user_id should not be empty/],
      ];
      for (const [fields, message] of cases) {
        const res = await update(admin, { ...base, ...fields });
        expect({ fields, status: res.status, message: res.body.error_message }).toEqual({ fields, status: 400, message: expect.stringMatching(message) });
      }
      // On update the attachment moves: the one given replaces the stored one; nulls beside it are fine.
      const first = await created(vpnCredential({ user_id: ids.user }));
      const moved = await update(admin, { egress_credential_id: first.egress_credential_id, user_id: null, image_id: ids.image });
      expect(moved.body.egress_credentials[0]).toEqual(expect.objectContaining({ user_id: null, group_id: null, image_id: ids.image }));
      const cleared = await update(admin, { egress_credential_id: first.egress_credential_id, image_id: null });
      expect(cleared.status).toBe(400);
    });

    it('refuses missing and unknown required fields and ids', async () => {
      const cases: Array<[Record<string, unknown>, number, RegExp]> = [
        [{}, 400, /target_egress_credential/],
        [{ target_egress_credential: 'x' }, 400, /target_egress_credential/],
        [{ target_egress_credential: { ...vpnCredential({ user_id: ids.user }), egress_provider_id: undefined } }, 400, /egress_provider_id is required/],
        [{ target_egress_credential: { ...vpnCredential({ user_id: ids.user }), name: undefined } }, 400, /name is required/],
        [{ target_egress_credential: { ...vpnCredential({ user_id: ids.user }), name: '' } }, 400, /name should not be empty/],
        [{ target_egress_credential: { ...vpnCredential({ user_id: ids.user }), egress_provider_id: toWireId(newId()) } }, 400, /^Invalid egress_provider_id/],
        [{ target_egress_credential: { ...vpnCredential({ user_id: ids.user }), enabled: 'true' } }, 400, /enabled must be a boolean/],
        [{ target_egress_credential: { egress_credential_id: toWireId(newId()), name: 'x' } }, 400, /^Invalid egress_credential_id/],
        [{ target_egress_credential: { egress_credential_id: 'garbage' } }, 400, /^Invalid egress_credential_id \(garbage\)$/],
      ];
      for (const [body, status, message] of cases) {
        const res = await api.call('update_egress_credential', admin, body);
        expect({ body, status: res.status, message: res.body.error_message }).toEqual({ body, status, message: expect.stringMatching(message) });
      }
    });
  });

  describe('conditional permissions by what the credential is attached to', () => {
    const OWNERS: Array<[string, () => Record<string, string>, Permission[]]> = [
      ['a user', () => ({ user_id: ids.user }), ['Users Modify']],
      ['a Global Admin user', () => ({ user_id: ids.adminUser }), ['Users Modify', 'Users Modify Admin']],
      ['a group', () => ({ group_id: ids.group }), ['Groups Modify']],
      ['a built-in group', () => ({ group_id: ids.systemGroup }), ['Groups Modify', 'Groups Modify System']],
      ['an image', () => ({ image_id: ids.image }), ['Images Modify']],
    ];

    it.each(OWNERS)('%s: refused with the base permissions (and with all but the last conditional one), granted with them', async (_label, owner, needed) => {
      for (const held of [[], needed.slice(0, -1)]) {
        const refused = await update(await keyWith(held), vpnCredential(owner()));
        expect(refused.status).toBe(403);
        expect(refused.body.error_message).toMatch(new RegExp(`^Missing permissions \\(the egress credential is attached to .*\\): .*${needed[held.length]}`));
      }
      const granted = await update(await keyWith(needed), vpnCredential(owner()));
      expect(granted.status).toBe(200);
      const id = granted.body.egress_credentials[0].egress_credential_id;

      // Changing and deleting it are checked the same way.
      const changeRefused = await update(await keyWith(needed.slice(0, -1)), { egress_credential_id: id, name: 'x' });
      expect(changeRefused.status).toBe(403);
      const deleteRefused = await remove(await keyWith(needed.slice(0, -1)), { egress_credential_id: id });
      expect(deleteRefused.status).toBe(403);
      expect((await update(await keyWith(needed), { egress_credential_id: id, name: 'x' })).status).toBe(200);
      expect((await remove(await keyWith(needed), { egress_provider_mapping_id: id })).status).toBe(200);
      expect(await db.getRepository(EgressCredential).countBy({ id: parseId(id) as string })).toBe(0);
    });

    it('creating (no egress_credential_id) also needs Egress Credentials Create; changing does not', async () => {
      const modifyOnly = await api.key([...closure(['Egress Credentials Modify', 'Egress Providers Modify', 'Images Modify'])]);
      const refused = await update(modifyOnly, vpnCredential({ image_id: ids.image }));
      expect(refused.status).toBe(403);
      expect(refused.body.error_message).toBe('Missing permissions (no egress_credential_id: the credential is created): Egress Credentials Create');
      const existing = await created(vpnCredential({ image_id: ids.image }));
      expect((await update(modifyOnly, { egress_credential_id: existing.egress_credential_id, name: 'changed' })).status).toBe(200);
    });

    it('checks the attachment before and after a change', async () => {
      const imagesOnly = await keyWith(['Images Modify']);
      const usersOnly = await keyWith(['Users Modify']);
      const onImage = await created(vpnCredential({ image_id: ids.image }));
      // After: an image key may not move a credential onto a user.
      const toUser = await update(imagesOnly, { egress_credential_id: onImage.egress_credential_id, image_id: null, user_id: ids.user });
      expect(toUser.status).toBe(403);
      expect(toUser.body.error_message).toMatch(/attached to a user.*Users Modify/);
      // Before: a users key may not take a credential off an image.
      const fromImage = await update(usersOnly, { egress_credential_id: onImage.egress_credential_id, image_id: null, user_id: ids.user });
      expect(fromImage.status).toBe(403);
      expect(fromImage.body.error_message).toMatch(/attached to an image.*Images Modify/);
      const both = await update(await keyWith(['Images Modify', 'Users Modify']), { egress_credential_id: onImage.egress_credential_id, image_id: null, user_id: ids.user });
      expect(both.status).toBe(200);
      expect((await stored(onImage.egress_credential_id)).userId).toBe(parseId(ids.user));
    });
  });

  describe('delete_egress_provider_mapping', () => {
    it('takes egress_provider_mapping_id or egress_credential_id (both: the same one)', async () => {
      for (const field of ['egress_provider_mapping_id', 'egress_credential_id']) {
        const { egress_credential_id: id } = await created(vpnCredential({ user_id: ids.user }));
        const res = await remove(admin, { [field]: id });
        expect(res.status).toBe(200);
        expect(res.body).toEqual({});
        expect(await db.getRepository(EgressCredential).countBy({ id: parseId(id) as string })).toBe(0);
      }
      const { egress_credential_id: id } = await created(vpnCredential({ user_id: ids.user }));
      expect((await remove(admin, { egress_provider_mapping_id: id, egress_credential_id: parseId(id) })).status).toBe(200);
    });

    it('refuses both names differing, neither, and unknown ids', async () => {
      const { egress_credential_id: id } = await created(vpnCredential({ user_id: ids.user }));
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ target_egress_credential: { egress_provider_mapping_id: id, egress_credential_id: toWireId(newId()) } }, /egress_provider_mapping_id and .*egress_credential_id name the same credential and differ/],
        [{ target_egress_credential: {} }, /egress_credential_id \(or egress_provider_mapping_id\) is required/],
        [{}, /target_egress_credential/],
        [{ target_egress_credential: { egress_credential_id: toWireId(newId()) } }, /^Invalid egress_credential_id/],
        [{ target_egress_credential: { egress_provider_mapping_id: 'nope' } }, /^Invalid egress_provider_mapping_id \(nope\)$/],
        [{ target_egress_credential: { egress_credential_id: 5 } }, /egress_credential_id must be a string/],
      ];
      for (const [body, message] of cases) {
        const res = await api.call('delete_egress_provider_mapping', admin, body);
        expect({ body, status: res.status, message: res.body.error_message }).toEqual({ body, status: 400, message: expect.stringMatching(message) });
      }
      expect(await db.getRepository(EgressCredential).countBy({ id: parseId(id) as string })).toBe(1);
    });

    it('refuses a credential in use (409) until its connections are released', async () => {
      // On an image no other test attaches VPN credentials to: the reservation must pick this one.
      const { egress_credential_id: id } = await created(vpnCredential({ image_id: ids.otherImage }));
      const connections = api.app.get(EgressConnections);
      const workspaceId = newId();
      await db.transaction((tx) => connections.reserve(tx, { workspaceId, userId: null, groupIds: [], imageId: parseId(ids.otherImage) as string, gatewayId: toWireId(gwA.id) }));
      const refused = await remove(admin, { egress_credential_id: id });
      expect(refused.status).toBe(409);
      expect(refused.body.error_message).toMatch(/is used by 1 live workspace/);
      await db.transaction((tx) => connections.release(tx, workspaceId));
      expect((await remove(admin, { egress_credential_id: id })).status).toBe(200);
    });
  });

  describe('EgressConnections', () => {
    let connections: EgressConnections;
    const reserveFor = (workspaceId: string, fields: Partial<{ userId: string | null; groupIds: string[]; imageId: string; gatewayId: string }> = {}) =>
      db.transaction((tx) => connections.reserve(tx, {
        workspaceId, userId: parseId(ids.user), groupIds: [parseId(ids.group) as string], imageId: parseId(ids.otherImage) as string, gatewayId: toWireId(gwM.id), ...fields,
      }));
    const liveCount = async (id: unknown) => (await update(admin, { egress_credential_id: id })).body.egress_credentials[0].active_connections as number;

    /** Each test starts with no mesh credential (earlier tests made some) and no connection. */
    async function clean(): Promise<void> {
      await db.query('DELETE FROM egress_connections');
      await db.query('DELETE FROM egress_credentials WHERE provider_id = $1', [mesh.id]);
    }
    beforeAll(() => {
      connections = api.app.get(EgressConnections);
    });
    beforeEach(clean);
    afterEach(clean);

    it('reserves up to the limit under concurrent launches: exactly k of N succeed, the rest get 409', async () => {
      const limit = 3;
      const attempts = 10;
      const { egress_credential_id: id } = await created({
        egress_provider_id: toWireId(mesh.id), name: 'team mesh', mesh_key: 'tskey', group_id: ids.group, allow_all_gateways: false, selected_gateways: [toWireId(gwM.id)],
        limit_active_connections: true, active_connection_limit: limit,
      });
      const workspaceIds = Array.from({ length: attempts }, () => newId());
      // Every launch holds its own connection and transaction before any reserves, so all of them race on the count.
      let arrived = 0;
      let allArrived!: () => void;
      const barrier = new Promise<void>((resolve) => (allArrived = resolve));
      const results = await Promise.allSettled(workspaceIds.map((workspaceId) => db.transaction(async (tx) => {
        await tx.query('SELECT 1');
        if (++arrived === attempts) allArrived();
        await barrier;
        return connections.reserve(tx, { workspaceId, userId: parseId(ids.user), groupIds: [parseId(ids.group) as string], imageId: parseId(ids.otherImage) as string, gatewayId: toWireId(gwM.id) });
      })));
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(results.filter((r) => r.status === 'fulfilled').length).toBe(limit);
      expect(lost.map((r) => [r.reason.code, r.reason.message])).toEqual(
        Array.from({ length: attempts - limit }, () => ['conflict', expect.stringMatching(/^Egress connection limit reached for the gateway exit-1 \(team mesh: 3 of 3\)$/)]),
      );
      expect(await liveCount(id)).toBe(limit);

      // A release frees one place, once: releasing again changes nothing.
      const winner = workspaceIds[results.findIndex((r) => r.status === 'fulfilled')];
      expect(await db.transaction((tx) => connections.release(tx, winner))).toBe(true);
      expect(await db.transaction((tx) => connections.release(tx, winner))).toBe(false);
      expect(await liveCount(id)).toBe(limit - 1);
      const next = await reserveFor(newId());
      expect(toWireId(next.credential.id)).toBe(id);
      expect(await liveCount(id)).toBe(limit);
    });

    it('hands back the credential (sealed; in clear through EgressSecrets) with the gateway and provider; a rolled-back launch leaves no connection', async () => {
      const { egress_credential_id: id } = await created({ egress_provider_id: toWireId(mesh.id), name: 'image mesh', mesh_key: 'tskey-image', image_id: ids.otherImage, allow_all_gateways: true });
      const reservation = await reserveFor(newId(), { userId: null, groupIds: [] });
      expect(reservation.credential.meshKey).not.toContain('tskey-image');
      expect(api.app.get(EgressSecrets).reveal(reservation.credential).meshKey).toBe('tskey-image');
      expect(reservation.gateway.id).toBe(gwM.id);
      expect(reservation.provider.type).toBe('mesh_network');
      await expect(db.transaction(async (tx) => {
        await connections.reserve(tx, { workspaceId: newId(), userId: null, groupIds: [], imageId: parseId(ids.otherImage) as string, gatewayId: toWireId(gwM.id) });
        throw new Error('launch failed later');
      })).rejects.toThrow('launch failed later');
      expect(await liveCount(id)).toBe(1);
    });

    it('prefers the user\'s own credential, then a group\'s, then the image\'s, moving on when one is full', async () => {
      const mk = (name: string, owner: Record<string, string>, limit?: number) => created({
        egress_provider_id: toWireId(mesh.id), name, mesh_key: name, allow_all_gateways: true, ...owner, ...(limit ? { limit_active_connections: true, active_connection_limit: limit } : {}),
      });
      const image = await mk('image', { image_id: ids.otherImage });
      const group = await mk('group', { group_id: ids.group }, 1);
      const own = await mk('own', { user_id: ids.user }, 1);
      expect(toWireId((await reserveFor(newId())).credential.id)).toBe(own.egress_credential_id);
      expect(toWireId((await reserveFor(newId())).credential.id)).toBe(group.egress_credential_id);
      expect(toWireId((await reserveFor(newId())).credential.id)).toBe(image.egress_credential_id);
      expect(toWireId((await reserveFor(newId())).credential.id)).toBe(image.egress_credential_id);
    });

    it('refuses an unknown gateway (400), a gateway no usable credential allows (403), and skips disabled credentials', async () => {
      await expect(reserveFor(newId(), { gatewayId: 'nope' })).rejects.toMatchObject({ code: 'invalid_id', message: 'Invalid egress_gateway_id (nope)' });
      await expect(reserveFor(newId())).rejects.toMatchObject({ code: 'forbidden', message: expect.stringMatching(/No enabled egress credential of the provider mesh allows the gateway exit-1/) });
      const other = await api.app.get(EgressCatalog).createGateway('mesh', { name: 'exit-2' });
      const { egress_credential_id: id } = await created({
        egress_provider_id: toWireId(mesh.id), name: 'selected', mesh_key: 'k', user_id: ids.user, allow_all_gateways: false, selected_gateways: [toWireId(other.id)],
      });
      await expect(reserveFor(newId())).rejects.toMatchObject({ code: 'forbidden' });
      expect((await reserveFor(newId(), { gatewayId: toWireId(other.id) })).gateway.name).toBe('exit-2');
      await update(admin, { egress_credential_id: id, enabled: false });
      await expect(reserveFor(newId(), { gatewayId: toWireId(other.id) })).rejects.toMatchObject({ code: 'forbidden' });
      // Another user's credential is not this user's.
      await update(admin, { egress_credential_id: id, enabled: true, user_id: ids.adminUser });
      await expect(reserveFor(newId(), { gatewayId: toWireId(other.id) })).rejects.toMatchObject({ code: 'forbidden' });
    });
  });

  describe('operator CLI', () => {
    it('adds, lists and removes providers, gateways and credentials; secrets masked unless --show-secrets', async () => {
      const provider = JSON.parse(await cli('egress', 'provider', 'add', 'cli-vpn', '--type', 'username_password_vpn', '--json'));
      expect(provider).toEqual({ egress_provider_id: expect.stringMatching(HEX32), name: 'cli-vpn', egress_provider_type: 'username_password_vpn' });
      await expect(cli('egress', 'provider', 'add', 'bad', '--type', 'openvpn')).rejects.toThrow(/type must be one of username_password_vpn, key_pair_tunnel, mesh_network, custom/);
      expect(JSON.parse(await cli('egress', 'provider', 'list', '--json')).map((p: { name: string }) => p.name)).toContain('cli-vpn');

      const gateway = JSON.parse(await cli('egress', 'gateway', 'add', 'cli-vpn', 'cli-gw', '--endpoint', 'vpn.example.com:443', '--config', '{"proto":"tcp"}', '--json'));
      expect(gateway).toEqual({ egress_gateway_id: expect.stringMatching(HEX32), name: 'cli-gw', egress_provider: 'cli-vpn', endpoint: 'vpn.example.com:443', config: { proto: 'tcp' } });
      expect(JSON.parse(await cli('egress', 'gateway', 'list', '--provider', 'cli-vpn', '--json'))).toEqual([gateway]);

      // Secrets only from stdin (issue 19): a flag would show in ps and the shell's history.
      await expect(cli('egress', 'credential', 'add', '--provider', 'cli-vpn', '--name', 'flag', '--group', 'egress-team', '--username', 'carol', '--password', 's3cret', '--all-gateways'))
        .rejects.toThrow(/unknown option '--password'/);
      const credential = JSON.parse(await cliWithStdin(
        's3cret\n', 'egress', 'credential', 'add', '--provider', 'cli-vpn', '--name', 'cli cred', '--group', 'egress-team', '--username', 'carol', '--secret-stdin', '--gateway', 'cli-gw', '--limit', '2', '--json',
      ));
      expect(credential).toEqual(expect.objectContaining({
        name: 'cli cred', group_id: ids.group, username: 'carol', password: MASK, allow_all_gateways: false, limit_active_connections: true, active_connection_limit: 2,
        egress_gateways: [{ name: 'cli-gw', egress_gateway_id: gateway.egress_gateway_id }],
      }));
      await expect(cliWithStdin('p', 'egress', 'credential', 'add', '--provider', 'cli-vpn', '--name', 'x', '--username', 'u', '--secret-stdin', '--all-gateways')).rejects.toThrow(/exactly one of --user, --group, --image/);
      await expect(cli('egress', 'credential', 'add', '--provider', 'cli-vpn', '--name', 'x', '--user', 'egress-user', '--username', 'u', '--all-gateways')).rejects.toThrow(/password is required/);

      const listed = JSON.parse(await cli('egress', 'credential', 'list', '--json')).find((c: { egress_credential_id: string }) => c.egress_credential_id === credential.egress_credential_id);
      expect(listed.password).toBe(MASK);
      const shown = JSON.parse(await cli('egress', 'credential', 'list', '--show-secrets', '--json')).find((c: { egress_credential_id: string }) => c.egress_credential_id === credential.egress_credential_id);
      expect(shown.password).toBe('s3cret');
      expect(await cli('egress', 'credential', 'list')).not.toContain('s3cret');

      expect(await cli('egress', 'credential', 'remove', credential.egress_credential_id)).toContain('removed');
      expect(await cli('egress', 'gateway', 'remove', 'cli-gw')).toContain('removed');
      expect(await cli('egress', 'provider', 'remove', 'cli-vpn')).toContain('removed');
      expect(await db.getRepository(EgressProvider).countBy({ name: 'cli-vpn' })).toBe(0);
    });
  });
});
