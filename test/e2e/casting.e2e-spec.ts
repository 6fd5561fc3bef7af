import { createServer, Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { newId, parseId, randomSecret, toWireId } from '@ws/common';
import { Group, GroupsService } from '@ws/groups';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { SettingsService } from '@ws/settings';
import { ZonesService } from '@ws/zones';
import { insertWorkspaceRow } from './fixtures';
import { desktopImage, HEX32, localDocker, TestApi, TestKey, waitFor } from './harness';
import { PrivateRedis } from './private-redis';


/** The five casting-config operations over HTTP: every field, names filled in, key unique, refusals naming the field. */
describe('casting configs', () => {
  let api: TestApi;
  let admin: TestKey;
  let imageId: string;
  let groupId: string;

  beforeAll(async () => {
    api = await TestApi.start();
    imageId = toWireId((await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Cast desktop', portMap: { vnc: '5900/tcp' } })).id);
    groupId = toWireId((await api.app.get(GroupsService).findByRef('All Users')).id);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  const create = (fields: Record<string, unknown>) => api.call('create_cast_config', admin, { target_cast_config: fields });
  const every = () => ({
    casting_config_name: 'Kiosk', image_id: imageId, key: `kiosk-${Math.random().toString(36).slice(2, 10)}`, allowed_referrers: ['example.test', 'intranet.test:8443'],
    limit_sessions: true, session_remaining: 5, limit_ips: true, ip_request_limit: 2, ip_request_seconds: 30, error_url: 'https://example.test/sorry',
    enable_sharing: true, disable_control_panel: true, disable_tips: true, disable_fixed_res: false, allow_anonymous: true, group_id: groupId,
    require_recaptcha: false, workspace_url: 'https://example.test/start', dynamic_workspace_url: true, dynamic_container_network: false, allow_resume: false,
    enforce_client_settings: true, allow_workspace_audio: false, allow_workspace_uploads: true, allow_workspace_downloads: false, allow_workspace_clipboard_down: true,
    allow_workspace_clipboard_up: false, allow_workspace_microphone: true, allow_workspace_sharing: false, workspace_audio_default_on: false,
    workspace_ime_mode_default_on: true, valid_until: '2099-12-31 23:59:59',
  });

  it('creates, reads, lists, updates and deletes a config with every field of the spec', async () => {
    const fields = every();
    const created = await create(fields);
    expect(created.status).toBe(200);
    const config = created.body.cast_config;
    expect(config).toEqual({
      ...fields, cast_config_id: expect.stringMatching(HEX32), image_friendly_name: 'Cast desktop', group_name: 'All Users', valid_until: '2099-12-31 23:59:59.000000',
    });
    const ref = { cast_config_id: config.cast_config_id };
    expect((await api.call('get_cast_config', admin, ref)).body).toEqual({ cast_config: config });
    expect((await api.call('get_cast_configs', admin)).body.cast_configs).toContainEqual(config);

    const updated = await api.call('update_cast_config', admin, {
      target_cast_config: { cast_config_id: config.cast_config_id, session_remaining: 0, group_id: null, error_url: null, valid_until: '2030-01-02T03:04:05+01:00', disable_tips: false },
    });
    expect(updated.status).toBe(200);
    expect(updated.body.cast_config).toEqual({ ...config, session_remaining: 0, group_id: null, group_name: null, error_url: null, valid_until: '2030-01-02 02:04:05.000000', disable_tips: false });

    expect((await api.call('delete_cast_config', admin, ref)).body).toEqual({});
    const gone = await api.call('get_cast_config', admin, ref);
    expect(gone.status).toBe(400);
    expect(gone.body.error_message).toContain('cast_config_id');
  });

  it('makes a key when none is given and refuses a duplicate key with 409', async () => {
    const first = await create({ casting_config_name: 'A', image_id: imageId });
    expect(first.status).toBe(200);
    expect(first.body.cast_config.key).toMatch(/^[0-9a-f]{32}$/);
    expect(first.body.cast_config).toMatchObject({ allowed_referrers: [], limit_sessions: false, allow_anonymous: false, group_id: null, valid_until: null });
    const duplicate = await create({ casting_config_name: 'B', image_id: imageId, key: first.body.cast_config.key });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.error_message).toContain('key');
    const second = await create({ casting_config_name: 'C', image_id: imageId });
    const renamed = await api.call('update_cast_config', admin, { target_cast_config: { cast_config_id: second.body.cast_config.cast_config_id, key: first.body.cast_config.key } });
    expect(renamed.status).toBe(409);
  });

  it.each([
    [{ image_id: 'x' }, 'casting_config_name'],
    [{ casting_config_name: 'x' }, 'image_id'],
    [{ casting_config_name: 'x', image_id: '0'.repeat(32) }, 'image_id'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', group_id: '0'.repeat(32) }, 'group_id'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', key: 'has space' }, 'key'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', valid_until: 'tomorrow' }, 'valid_until'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', session_remaining: -1 }, 'session_remaining'],
    [{ casting_config_name: 'x', image_id: 'IMAGE', error_url: 'javascript:alert(1)' }, 'error_url'],
  ])('refuses %j with a 400 naming %s', async (fields, field) => {
    const res = await create(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v === 'IMAGE' ? imageId : v])));
    expect(res.status).toBe(400);
    expect(res.body.error_message).toContain(field);
  });
});

/** A captcha verify endpoint of the test's own on loopback: a token is good when it is `solved` and the secret is the private key set. */
async function startVerifyServer(): Promise<{ server: HttpServer; url: string; seen: URLSearchParams[] }> {
  const seen: URLSearchParams[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      seen.push(form);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ success: form.get('secret') === 'the-private-key' && form.get('response') === 'solved' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/siteverify`, seen };
}

/** POST /api/client/cast and its rules; workspaces are recorded (no worker: no container is needed to see a launch decided). */
describe('cast launch', () => {
  let api: TestApi;
  let admin: TestKey;
  let imageId: string;
  let groupId: string;
  let verify: Awaited<ReturnType<typeof startVerifyServer>>;
  let db: DataSource;

  beforeAll(async () => {
    verify = await startVerifyServer();
    api = await TestApi.start({ RECAPTCHA_VERIFY_URL: verify.url, RECAPTCHA_SCRIPT_URL: 'http://127.0.0.1:9/recaptcha.js' });
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'cast-host', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 256 * 1024 ** 3 });
    imageId = toWireId((await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Cast launch desktop', cores: 1, memory: 512 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    admin = await api.key(['Global Admin']);
    groupId = toWireId((await db.getRepository(Group).save({ id: newId(), name: 'Cast visitors', description: null, systemKey: null })).id);
  });
  afterAll(async () => {
    await api?.close();
    verify?.server.close();
    verify?.server.closeAllConnections();
  });

  let keys = 0;
  const link = async (fields: Record<string, unknown> = {}) => {
    const res = await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: 'Link', image_id: imageId, key: `link-${++keys}`, allow_anonymous: true, ...fields } });
    expect(res.status).toBe(200);
    return res.body.cast_config as { key: string; cast_config_id: string };
  };
  const launch = (body: Record<string, unknown>, headers: Record<string, string> = {}, server = api.app.getHttpServer()) => {
    const req = request(server).post('/api/client/cast').set('content-type', 'application/json');
    for (const [name, value] of Object.entries(headers)) req.set(name, value);
    return req.send(body);
  };
  const loggedIn = async (username: string) => {
    const user = await api.call('create_user', admin, { target_user: { username } });
    const token = await api.call('create_session_token', admin, { target_user: { user_id: user.body.user.user_id } });
    return { userId: user.body.user.user_id as string, jwt: token.body.session_token.session_jwt as string };
  };
  const remaining = async (castConfigId: string) => (await api.call('get_cast_config', admin, { cast_config_id: castConfigId })).body.cast_config.session_remaining;

  it('info tells the client what to show first; an unknown key is a 404 naming the reason', async () => {
    const { key } = await link({ require_recaptcha: true });
    await api.app.get(SettingsService).set('recaptcha_site_key', 'the-site-key');
    const info = await request(api.app.getHttpServer()).get(`/api/client/cast/${key}/info`);
    expect(info.status).toBe(200);
    expect(info.body).toEqual({ require_recaptcha: true, recaptcha_site_key: 'the-site-key', allow_anonymous: true, recaptcha_script_url: 'http://127.0.0.1:9/recaptcha.js' });
    const unknown = await request(api.app.getHttpServer()).get('/api/client/cast/no-such-key/info');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error_message: expect.any(String), error_url: null, reason: 'unknown_link' });
    const launched = await launch({ key: 'no-such-key' });
    expect(launched.status).toBe(404);
    expect(launched.body.reason).toBe('unknown_link');
  });

  it('an anonymous link makes a new user in All Users and the link group, with the link url and the disable_* flags', async () => {
    const { key } = await link({ group_id: groupId, workspace_url: 'https://example.test/kiosk', disable_control_panel: true, disable_tips: true, enable_sharing: true });
    const first = await launch({ key });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      workspace_id: expect.stringMatching(HEX32), user_id: expect.stringMatching(HEX32), session_jwt: expect.any(String), resumed: false,
      workspace_url: `/#/connect/workspace/${first.body.workspace_id}/${first.body.user_id}/${first.body.session_jwt}?disable_control_panel=1&disable_tips=1`,
      disable_control_panel: true, disable_tips: true, disable_fixed_res: false,
    });
    const second = await launch({ key });
    expect(second.body.user_id).not.toBe(first.body.user_id);
    const groups = await db.query('SELECT g.name FROM user_groups m JOIN groups g ON g.id = m.group_id WHERE m.user_id = $1 ORDER BY g.name', [first.body.user_id]);
    expect(groups.map((g: { name: string }) => g.name)).toEqual(['All Users', 'Cast visitors']);
    const [row] = await db.query('SELECT launch_options, sharing_enabled, image_id FROM workspaces WHERE id = $1', [first.body.workspace_id]);
    expect(row.launch_options.workspaceUrl).toBe('https://example.test/kiosk');
    expect(row.sharing_enabled).toBe(true);
    expect(toWireId(row.image_id)).toBe(imageId);
  });

  it('workspace_url from the query argument only with dynamic_workspace_url', async () => {
    const fixed = await link({ workspace_url: 'https://example.test/fixed' });
    const dynamic = await link({ workspace_url: 'https://example.test/fixed', dynamic_workspace_url: true });
    const a = await launch({ key: fixed.key, workspace_url: 'https://example.test/visitor' });
    const b = await launch({ key: dynamic.key, workspace_url: 'https://example.test/visitor' });
    const urlOf = async (id: string) => (await db.query('SELECT launch_options FROM workspaces WHERE id = $1', [id]))[0].launch_options.workspaceUrl;
    expect(await urlOf(a.body.workspace_id)).toBe('https://example.test/fixed');
    expect(await urlOf(b.body.workspace_id)).toBe('https://example.test/visitor');
  });

  it('enforce_client_settings: the link\'s flags override the group client settings of that session only', async () => {
    const flags = {
      allow_workspace_audio: false, allow_workspace_uploads: false, allow_workspace_downloads: true, allow_workspace_clipboard_down: false,
      allow_workspace_clipboard_up: true, allow_workspace_microphone: true, allow_workspace_sharing: false, workspace_audio_default_on: false,
      workspace_ime_mode_default_on: true,
    };
    const enforced = await link({ enforce_client_settings: true, ...flags });
    const notEnforced = await link({ enforce_client_settings: false, ...flags });
    const a = await launch({ key: enforced.key });
    const b = await launch({ key: notEnforced.key });
    const listed = (await api.call('get_workspaces', admin)).body.workspaces as Array<{ workspace_id: string; client_settings: Record<string, unknown> }>;
    const settingsOf = (id: string) => listed.find((w) => w.workspace_id === id)?.client_settings;
    expect(settingsOf(a.body.workspace_id)).toMatchObject(flags);
    expect(settingsOf(b.body.workspace_id)).toMatchObject({ allow_workspace_audio: true, allow_workspace_uploads: true, allow_workspace_microphone: false, allow_workspace_sharing: true });
    expect(settingsOf(b.body.workspace_id)).not.toHaveProperty('workspace_ime_mode_default_on');
  });

  it('container_network: refused unless the link has dynamic_container_network and the image lists the network', async () => {
    const { key } = await link({ dynamic_container_network: true, error_url: 'https://example.test/oops' });
    const res = await launch({ key, container_network: 'bridge' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error_message: expect.any(String), error_url: 'https://example.test/oops', reason: 'network_not_allowed' });
    const images = api.app.get(ImagesService);
    const selectable = await images.upsert({ name: 'example/desktop:1', friendlyName: 'Networked desktop', portMap: { vnc: '5900/tcp' }, selectableNetworks: ['cast-net-a'] });
    const fixed = await link({ image_id: toWireId(selectable.id), dynamic_container_network: false });
    expect((await launch({ key: fixed.key, container_network: 'cast-net-a' })).body.reason).toBe('network_not_allowed');
    const open = await link({ image_id: toWireId(selectable.id), dynamic_container_network: true });
    expect((await launch({ key: open.key, container_network: 'cast-net-b' })).body.reason).toBe('network_not_allowed');
    const chosen = await launch({ key: open.key, container_network: 'cast-net-a' });
    expect(chosen.status).toBe(200);
    const [row] = await db.query('SELECT launch_options FROM workspaces WHERE id = $1', [chosen.body.workspace_id]);
    expect(row.launch_options.containerNetwork).toBe('cast-net-a');
    await expect(images.upsert({ name: 'example/desktop:1', friendlyName: 'Host desktop', selectableNetworks: ['host'] })).rejects.toThrow('selectable_networks');
  });

  it('an expired link refuses and names its error_url', async () => {
    const { key } = await link({ valid_until: '2020-01-01 00:00:00', error_url: 'https://example.test/expired' });
    const res = await launch({ key });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error_message: 'This link has expired', error_url: 'https://example.test/expired', reason: 'expired' });
    const still = await link({ valid_until: '2099-01-01 00:00:00' });
    expect((await launch({ key: still.key })).status).toBe(200);
  });

  it('allowed_referrers: the Referer host must be listed', async () => {
    const { key } = await link({ allowed_referrers: ['good.test', '*.partner.test'] });
    const wrong = await launch({ key }, { referer: 'https://evil.test/page' });
    expect(wrong.status).toBe(403);
    expect(wrong.body.reason).toBe('referrer');
    expect((await launch({ key })).body.reason).toBe('referrer');
    expect((await launch({ key }, { referer: 'https://good.test/some/page?x=1' })).status).toBe(200);
    expect((await launch({ key }, { referer: 'https://shop.partner.test/' })).status).toBe(200);
    expect((await launch({ key }, { referer: 'https://good.test.evil.test/' })).body.reason).toBe('referrer');
    // The browser client passes the page that linked to the cast link in the body; it wins over the header.
    expect((await launch({ key, referrer: 'https://good.test/from' }, { referer: 'http://service.test/#/cast/x' })).status).toBe(200);
    expect((await launch({ key, referrer: 'https://evil.test/from' }, { referer: 'https://good.test/' })).body.reason).toBe('referrer');
  });

  it('without allow_anonymous a logged-in session is required, and the launch is that user\'s', async () => {
    const { key } = await link({ allow_anonymous: false, error_url: 'https://example.test/login' });
    const anonymous = await launch({ key });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toEqual({ error_message: expect.any(String), error_url: 'https://example.test/login', reason: 'login_required' });
    expect((await launch({ key, session_jwt: 'forged.jwt.value' })).body.reason).toBe('login_required');
    const visitor = await loggedIn('cast-visitor');
    const res = await launch({ key, session_jwt: visitor.jwt });
    expect(res.status).toBe(200);
    expect(res.body.user_id).toBe(visitor.userId);
  });

  it('session_remaining: 10 concurrent launches against 3 remaining launch exactly 3, and it stays at 0', async () => {
    const config = await link({ limit_sessions: true, session_remaining: 3, error_url: 'https://example.test/full' });
    const answers = await Promise.all(Array.from({ length: 10 }, () => launch({ key: config.key })));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 200, 200, 403, 403, 403, 403, 403, 403, 403]);
    for (const refused of answers.filter((a) => a.status === 403)) expect(refused.body).toMatchObject({ reason: 'session_limit', error_url: 'https://example.test/full' });
    expect(await remaining(config.cast_config_id)).toBe(0);
    const launched = answers.filter((a) => a.status === 200).map((a) => a.body.workspace_id);
    expect(new Set(launched).size).toBe(3);
  });

  it('session_remaining is given back when the launch itself fails', async () => {
    const disabled = await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Disabled cast desktop', portMap: { vnc: '5900/tcp' } });
    await db.query('UPDATE images SET enabled = false WHERE id = $1', [disabled.id]);
    const config = await link({ image_id: toWireId(disabled.id), limit_sessions: true, session_remaining: 2, error_url: 'https://example.test/disabled' });
    const res = await launch({ key: config.key });
    expect(res.status).toBe(400);
    // A refusal from the launch pipeline carries the link's error_url too.
    expect(res.body).toEqual({ error_message: expect.any(String), error_url: 'https://example.test/disabled', reason: 'launch_refused' });
    expect(await remaining(config.cast_config_id)).toBe(2);
  });

  it('limit_ips: ip_request_limit launches per address per period, counted across two api processes', async () => {
    const replica = await api.replica();
    try {
      const { key } = await link({ limit_ips: true, ip_request_limit: 3, ip_request_seconds: 3600, error_url: 'https://example.test/slow-down' });
      const servers = [api.app.getHttpServer(), replica.getHttpServer()];
      const answers = [];
      for (let i = 0; i < 5; i++) answers.push(await launch({ key }, {}, servers[i % 2]));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429, 429]);
      expect(answers[3].body).toMatchObject({ reason: 'address_limit', error_url: 'https://example.test/slow-down' });
      expect(Number(answers[4].headers['retry-after'])).toBeGreaterThan(0);
      // Another link has a count of its own.
      const other = await link({ limit_ips: true, ip_request_limit: 1, ip_request_seconds: 3600 });
      expect((await launch({ key: other.key }, {}, servers[1])).status).toBe(200);
    } finally {
      await replica.close();
    }
  });

  it('require_recaptcha: no token, a refused token and a verified one (verify server on loopback, private key from the settings)', async () => {
    await api.app.get(SettingsService).set('recaptcha_private_key', 'the-private-key');
    const { key } = await link({ require_recaptcha: true, error_url: 'https://example.test/robot' });
    const missing = await launch({ key });
    expect(missing.status).toBe(403);
    expect(missing.body).toMatchObject({ reason: 'captcha_required', error_url: 'https://example.test/robot' });
    const before = verify.seen.length;
    const refused = await launch({ key, recaptcha_token: 'guessed' });
    expect(refused.status).toBe(403);
    expect(refused.body.reason).toBe('captcha_failed');
    const verified = await launch({ key, recaptcha_token: 'solved' });
    expect(verified.status).toBe(200);
    expect(verify.seen.slice(before).map((form) => [form.get('secret'), form.get('response'), form.get('remoteip')])).toEqual([
      ['the-private-key', 'guessed', expect.stringContaining('127.0.0.1')],
      ['the-private-key', 'solved', expect.stringContaining('127.0.0.1')],
    ]);
  });

  it('a captcha verifier outage is a 503 that still names the link error_url', async () => {
    await api.app.get(SettingsService).set('recaptcha_private_key', 'the-private-key');
    const { key } = await link({ require_recaptcha: true, error_url: 'https://example.test/verifier-down' });
    // The verifier goes away (its port refuses connections) and comes back on the same port afterwards.
    const closed = new Promise<void>((resolve) => verify.server.close(() => resolve()));
    verify.server.closeAllConnections();
    await closed;
    try {
      const down = await launch({ key, recaptcha_token: 'solved' });
      expect(down.status).toBe(503);
      expect(down.body).toEqual({ error_message: 'The captcha could not be verified right now; try again', error_url: 'https://example.test/verifier-down', reason: 'captcha_failed' });
    } finally {
      const port = Number(new URL(verify.url).port);
      await new Promise<void>((resolve) => verify.server.listen(port, '127.0.0.1', resolve));
    }
  });

  it('allow_resume: a logged-in person with a running workspace of the image gets the same workspace with a new link', async () => {
    const visitor = await loggedIn('cast-resumer');
    const running = await insertWorkspaceRow(db, visitor.userId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'));
    const resuming = await link({ image_id: toWireId(running.imageId), allow_anonymous: false, allow_resume: true, limit_sessions: true, session_remaining: 1 });
    const res = await launch({ key: resuming.key, session_jwt: visitor.jwt });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ workspace_id: toWireId(running.id), user_id: visitor.userId, resumed: true });
    expect(res.body.session_jwt).not.toBe(visitor.jwt);
    expect(await remaining(resuming.cast_config_id)).toBe(1);
    const fresh = await link({ image_id: toWireId(running.imageId), allow_anonymous: false, allow_resume: false });
    const notResumed = await launch({ key: fresh.key, session_jwt: visitor.jwt });
    expect(notResumed.body.resumed).toBe(false);
    expect(notResumed.body.workspace_id).not.toBe(toWireId(running.id));
  });

  it('an anonymous visitor\'s session_jwt is no login: refused where a login is needed, and it solves no captcha (issue 19, hole 4)', async () => {
    const first = await launch({ key: (await link()).key });
    expect(first.status).toBe(200);
    const anonymousJwt = first.body.session_jwt as string;
    const loginOnly = await link({ allow_anonymous: false });
    const refused = await launch({ key: loginOnly.key, session_jwt: anonymousJwt });
    expect(refused.status).toBe(401);
    expect(refused.body.reason).toBe('login_required');
    const [{ count }] = await db.query('SELECT count(*)::int AS count FROM workspaces WHERE user_id = $1', [parseId(first.body.user_id)]);
    expect(count).toBe(1);

    await api.app.get(SettingsService).set('recaptcha_private_key', 'the-private-key');
    const captcha = await link({ require_recaptcha: true });
    const skipped = await launch({ key: captcha.key, session_jwt: anonymousJwt });
    expect(skipped.status).toBe(403);
    expect(skipped.body.reason).toBe('captcha_required');
    // Positive control: the visit with the captcha solved is an anonymous one of its own, not the earlier visitor's.
    const solved = await launch({ key: captcha.key, session_jwt: anonymousJwt, recaptcha_token: 'solved' });
    expect(solved.status).toBe(200);
    expect(solved.body.user_id).not.toBe(first.body.user_id);
    // A login still opens the login-only link.
    const person = await loggedIn('cast-real-login');
    expect((await launch({ key: loginOnly.key, session_jwt: person.jwt })).body.user_id).toBe(person.userId);
  });

  it('a view-only sharing token or a workspace\'s own link is no login (issue 19, hole 5)', async () => {
    const owner = await loggedIn('cast-share-owner');
    const shared = await insertWorkspaceRow(db, parseId(owner.userId) as string);
    await db.query('UPDATE workspaces SET sharing_enabled = true WHERE id = $1', [shared.id]);
    const loginOnly = await link({ allow_anonymous: false });
    const joiner = await loggedIn('cast-joiner');
    for (const body of [{ share_id: shared.shareId }, { share_id: shared.shareId, user_id: joiner.userId }]) {
      const joined = await api.call('join_workspace', admin, body);
      expect(joined.status).toBe(200);
      const res = await launch({ key: loginOnly.key, session_jwt: joined.body.session_token });
      expect(res.status).toBe(401);
      expect(res.body.reason).toBe('login_required');
      const [{ count }] = await db.query('SELECT count(*)::int AS count FROM workspaces WHERE user_id = $1', [parseId(joined.body.user_id)]);
      expect(count).toBe(0);
    }
    // The owner's link to one workspace grants that workspace, not a login elsewhere.
    const own = await launch({ key: loginOnly.key, session_jwt: owner.jwt });
    expect(own.status).toBe(200);
    const again = await launch({ key: loginOnly.key, session_jwt: own.body.session_jwt });
    expect(again.status).toBe(401);
    expect(again.body.reason).toBe('login_required');
  });

  it('a refused launch never removes a visitor who existed before it, nor takes their workspace (issue 19, hole 1)', async () => {
    const first = await launch({ key: (await link()).key });
    expect(first.status).toBe(200);
    const disabled = await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Disabled for the refusal', portMap: { vnc: '5900/tcp' } });
    await db.query('UPDATE images SET enabled = false WHERE id = $1', [disabled.id]);
    const [{ count: usersBefore }] = await db.query('SELECT count(*)::int AS count FROM users');
    const refused = await launch({ key: (await link({ image_id: toWireId(disabled.id) })).key, session_jwt: first.body.session_jwt });
    expect(refused.status).toBe(400);
    const [row] = await db.query('SELECT user_id FROM workspaces WHERE id = $1', [parseId(first.body.workspace_id)]);
    expect(row.user_id).toBe(parseId(first.body.user_id));
    // The anonymous user made for the refused visit went; the earlier visitor stayed.
    const [{ count: usersAfter }] = await db.query('SELECT count(*)::int AS count FROM users');
    expect(usersAfter).toBe(usersBefore);
    expect((await api.call('get_user', admin, { target_user: { user_id: first.body.user_id } })).status).toBe(200);
  });

  it('the browser-route guard applies: a cross-site post is refused', async () => {
    const { key } = await link();
    const res = await launch({ key }, { origin: 'https://evil.test' });
    expect(res.status).toBe(403);
  });
});

/** The link key is the credential: unknown keys count as failed logins of the address, on info and launch (issue 19). */
describe('cast link enumeration', () => {
  const LIMIT = 5;
  let api: TestApi;
  let admin: TestKey;

  beforeAll(async () => {
    api = await TestApi.start({ AUTH_FAILURES_PER_ADDRESS: LIMIT, AUTH_FAILURE_WINDOW_SECONDS: 600, AUTH_BLOCK_SECONDS: 600 });
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => api?.close());

  it('answers 429 with Retry-After once an address guessed too many keys, known ones included; a known key costs nothing', async () => {
    const image = await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Enumerated desktop', portMap: { vnc: '5900/tcp' } });
    const created = await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: 'Known', image_id: toWireId(image.id), key: 'k1', allow_anonymous: true } });
    expect(created.status).toBe(200);
    const info = (key: string) => request(api.app.getHttpServer()).get(`/api/client/cast/${encodeURIComponent(key)}/info`);
    // Known keys are not failures: many lookups of one stay 200.
    for (let i = 0; i < LIMIT + 2; i++) expect((await info('k1')).status).toBe(200);
    const guesses = [];
    for (let i = 0; i < LIMIT - 1; i++) guesses.push((await info(`k${i + 2}`)).status);
    guesses.push((await request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key: 'k99' })).status);
    expect(guesses).toEqual([404, 404, 404, 404, 404]);
    const blocked = await info('k7');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect(blocked.body.error_message).toEqual(expect.any(String));
    // The address is blocked: even the known key gets nothing more for now, and neither does a launch.
    expect((await info('k1')).status).toBe(429);
    expect((await request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key: 'k1' })).status).toBe(429);
  });
});

/** A cast launch on a real Docker engine: served from a staging pool like request_workspace, then resumed. */
describe('cast launch on a real Docker engine', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;
  let imageId: string;
  /** A Docker network of this test's own, that the image lets a cast visitor choose. */
  const network = `wse2e-cast-${randomSecret(4)}`;

  beforeAll(async () => {
    await localDocker().docker.createNetwork({ Name: network, Driver: 'bridge', Labels: { 'workspace-server.e2e': 'casting' } });
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 16, memory: 16 * 1024 ** 3 });
    imageId = toWireId((await api.app.get(ImagesService).upsert({
      name: desktopImage(), friendlyName: 'Cast desktop', cores: 0.25, memory: 384 * 1024 ** 2, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp' }, selectableNetworks: [network],
    })).id);
    admin = await api.key(['Global Admin']);
    const staging = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: toWireId(zone.id), image_id: imageId, num_sessions: 1, expiration: 1 } });
    expect(staging.status).toBe(200);
  });
  afterAll(async () => {
    await api?.close();
    await localDocker().docker.getNetwork(network).remove().catch(() => undefined);
  });

  it('a logged-in visitor gets the staged desktop running, and the next visit resumes that same workspace with a new link', async () => {
    await waitFor('a ready staged desktop', async () => {
      const [{ ready }] = await db.query(`SELECT count(*)::int AS ready FROM workspaces WHERE staging_config_id IS NOT NULL AND user_id IS NULL AND status = 'running'`);
      return ready === 1 ? true : undefined;
    }, 240_000, 250);
    const user = await api.call('create_user', admin, { target_user: { username: 'cast-docker' } });
    const userId = user.body.user.user_id as string;
    const jwt = (await api.call('create_session_token', admin, { target_user: { user_id: userId } })).body.session_token.session_jwt as string;
    const config = (await api.call('create_cast_config', admin, {
      target_cast_config: { casting_config_name: 'Resumable', image_id: imageId, key: 'resumable', allow_resume: true, limit_sessions: true, session_remaining: 5 },
    })).body.cast_config;
    const launch = () => request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key: 'resumable', session_jwt: jwt });

    const first = await launch();
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ user_id: userId, resumed: false });
    const [row] = await db.query('SELECT status, staging_config_id, user_id FROM workspaces WHERE id = $1', [parseId(first.body.workspace_id)]);
    expect(row).toMatchObject({ status: 'running', user_id: parseId(userId) });
    expect(row.staging_config_id).not.toBeNull();

    const second = await launch();
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ workspace_id: first.body.workspace_id, user_id: userId, resumed: true });
    expect(second.body.session_jwt).not.toBe(first.body.session_jwt);
    // The new link opens that workspace in the browser client.
    const connect = await request(api.app.getHttpServer()).post('/api/client/connect').set('content-type', 'application/json')
      .send({ session_jwt: second.body.session_jwt, workspace_id: second.body.workspace_id });
    expect(connect.status).toBe(200);
    expect(connect.body).toMatchObject({ workspace_id: first.body.workspace_id, user_id: userId, view_only: false, operational_status: 'running' });
    expect((await api.call('get_cast_config', admin, { cast_config_id: config.cast_config_id })).body.cast_config.session_remaining).toBe(4);
  });

  it('an anonymous visitor\'s staged desktop stays theirs after a refused second visit, and never reaches the next user (issue 19, hole 1)', async () => {
    const readyStaged = () => db.query(`SELECT id, container_id FROM workspaces WHERE staging_config_id IS NOT NULL AND user_id IS NULL AND status = 'running'`) as Promise<Array<{ id: string; container_id: string }>>;
    await waitFor('a ready staged desktop', async () => ((await readyStaged()).length === 1 ? true : undefined), 240_000, 250);
    const cast = (body: Record<string, unknown>) => request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send(body);
    await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: 'Open', image_id: imageId, key: 'open-kiosk', allow_anonymous: true } });
    const visit = await cast({ key: 'open-kiosk' });
    expect(visit.status).toBe(200);
    const [planted] = await db.query('SELECT id, container_id, staging_config_id FROM workspaces WHERE id = $1', [parseId(visit.body.workspace_id)]);
    expect(planted.staging_config_id).not.toBeNull();
    const marker = `/tmp/planted-${randomSecret(4)}`;
    expect((await localDocker().exec(planted.container_id, { cmd: `echo secret > ${marker}` })).exitCode).toBe(0);

    // The same visitor opens a link that the pipeline refuses (its image is disabled).
    const disabled = await api.app.get(ImagesService).upsert({ name: desktopImage(), friendlyName: 'Disabled cast image', portMap: { vnc: '5900/tcp' } });
    await db.query('UPDATE images SET enabled = false WHERE id = $1', [disabled.id]);
    await api.call('create_cast_config', admin, { target_cast_config: { casting_config_name: 'Refusing', image_id: toWireId(disabled.id), key: 'refusing', allow_anonymous: true } });
    expect((await cast({ key: 'refusing', session_jwt: visit.body.session_jwt })).status).toBe(400);
    const [after] = await db.query('SELECT user_id, status FROM workspaces WHERE id = $1', [planted.id]);
    expect(after).toEqual({ user_id: parseId(visit.body.user_id), status: 'running' });

    // The pool refills with a new desktop; the next user gets that one, without the planted file.
    await waitFor('the pool refilled', async () => ((await readyStaged()).length === 1 ? true : undefined), 240_000, 250);
    expect((await readyStaged()).map((w) => w.id)).not.toContain(planted.id);
    const next = await api.call('create_user', admin, { target_user: { username: 'after-the-visitor' } });
    const requested = await api.call('request_workspace', admin, { user_id: next.body.user.user_id, image_id: imageId });
    expect(requested.status).toBe(200);
    expect(parseId(requested.body.workspace_id)).not.toBe(planted.id);
    const handed = await waitFor('the next desktop has a container', async () => {
      const [r] = await db.query('SELECT container_id FROM workspaces WHERE id = $1', [parseId(requested.body.workspace_id)]);
      return (r.container_id as string | null) ?? undefined;
    }, 240_000, 250);
    expect((await localDocker().exec(handed, { cmd: `test -e ${marker}` })).exitCode).not.toBe(0);
  });

  it('a container_network the image allows: a fresh desktop (not the staged one) running on that Docker network', async () => {
    const { key } = (await api.call('create_cast_config', admin, {
      target_cast_config: { casting_config_name: 'Networked', image_id: imageId, key: 'networked', allow_anonymous: true, dynamic_container_network: true },
    })).body.cast_config;
    const res = await request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key, container_network: network });
    expect(res.status).toBe(200);
    const row = await waitFor('the networked desktop running', async () => {
      const [r] = await db.query('SELECT status, container_id, staging_config_id FROM workspaces WHERE id = $1', [parseId(res.body.workspace_id)]);
      if (r.status === 'failed') throw new Error('the networked desktop failed');
      return r.status === 'running' ? r : undefined;
    }, 240_000, 250);
    expect(row.staging_config_id).toBeNull();
    const inspected = await localDocker().docker.getContainer(row.container_id).inspect();
    expect(Object.keys(inspected.NetworkSettings.Networks)).toEqual([network]);
  });
});

/** The address limit while Redis is down: a private redis-server of this test on loopback, stopped in the middle. */
describe('cast address limit during a Redis outage', () => {
  let api: TestApi;
  let redis: PrivateRedis;

  beforeAll(async () => {
    redis = await PrivateRedis.start();
    api = await TestApi.start({ REDIS_URL: redis.url });
    const zone = await api.app.get(ZonesService).ensure('default');
    await api.app.get(ServersService).upsert({ hostname: 'cast-host', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 256 * 1024 ** 3 });
  });
  afterAll(async () => {
    if (redis && !redis.running) await redis.restart();
    await api?.close();
    await redis?.stop();
  });

  it('answers 503 instead of launching uncounted, and takes no session', async () => {
    const admin = await api.key(['Global Admin']);
    const imageId = toWireId((await api.app.get(ImagesService).upsert({ name: 'example/desktop:1', friendlyName: 'Outage desktop', cores: 1, memory: 512 * 1024 ** 2, portMap: { vnc: '5900/tcp' } })).id);
    const config = (await api.call('create_cast_config', admin, {
      target_cast_config: {
        casting_config_name: 'Limited', image_id: imageId, key: 'limited', allow_anonymous: true, limit_ips: true, ip_request_limit: 5, limit_sessions: true, session_remaining: 5,
        error_url: 'https://example.test/outage',
      },
    })).body.cast_config;
    const launch = () => request(api.app.getHttpServer()).post('/api/client/cast').set('content-type', 'application/json').send({ key: 'limited' });
    expect((await launch()).status).toBe(200);
    await redis.stop();
    const refused = await launch();
    expect(refused.status).toBe(503);
    expect(refused.body.error_message).toContain('Redis');
    expect(refused.body).toMatchObject({ error_url: 'https://example.test/outage', reason: 'unavailable' });
    expect((await api.call('get_cast_config', admin, { cast_config_id: config.cast_config_id })).body.cast_config.session_remaining).toBe(4);
  });
});
