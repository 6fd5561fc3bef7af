import { DataSource } from 'typeorm';
import { ImagesService, ServerImagesService } from '@ws/images';
import { ZonesService } from '@ws/zones';
import { closeContext } from '../../apps/cli/src/context';
import { runCli as cli, runCliWithStdin as cliWithStdin } from './cli-runner';
import { TestApi, TestKey } from './harness';

const CREDENTIALS_KEY = 'e2e-server-credentials-key-0123456789';
const PASSWORD = 'vnc-Secret-4711';

/**
 * Server images (issue 14): `image add-server` stores the target with its password encrypted under
 * SERVER_CREDENTIALS_KEY, no listing shows the password, bad settings are refused, and request_workspace checks a
 * request's connection settings against the image (server-sessions.e2e-spec.ts runs the sessions themselves).
 */
describe('server images', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;
  const saved = { ...process.env };

  beforeAll(async () => {
    // Its images point at loopback, which an operator allows explicitly (server-targets-ssrf.e2e-spec.ts: the default refuses it).
    api = await TestApi.start({ SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY, SERVER_TARGETS_ALLOW: '127.0.0.0/8' });
    Object.assign(process.env, {
      DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, DEPLOYMENT_ID: api.config.DEPLOYMENT_ID, LOG_LEVEL: 'error', SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY,
      SERVER_TARGETS_ALLOW: '127.0.0.0/8',
    });
    db = api.app.get(DataSource);
    admin = await api.key(['Global Admin']);
  });
  afterAll(async () => {
    await closeContext();
    process.env = saved;
    await api?.close();
  });

  it('adds a server image with an encrypted password that no listing returns', async () => {
    const out = JSON.parse(await cliWithStdin(`${PASSWORD}\n`, 'image', 'add-server', 'Lab VNC', '--protocol', 'vnc', '--host', '127.0.0.1', '--port', '5901',
      '--password-stdin', '--allow-override', 'host,port', '--json'));
    expect(out).toMatchObject({ friendly_name: 'Lab VNC', kind: 'server', protocol: 'vnc', host: '127.0.0.1', port: 5901, allow_override: ['host', 'port'], rdp_client: 'guac', password_stored: true });
    const image = await api.app.get(ImagesService).findByRef('Lab VNC');
    expect({ kind: image.kind, name: image.name }).toEqual({ kind: 'server', name: 'server:vnc' });

    const [row] = await db.query('SELECT password_encrypted FROM server_targets WHERE image_id = $1', [image.id]);
    expect(row.password_encrypted).toMatch(/^v1:/);
    expect(row.password_encrypted).not.toContain(PASSWORD);
    expect(await api.app.get(ServerImagesService).targetOf(image.id)).toEqual({
      target: { protocol: 'vnc', host: '127.0.0.1', port: 5901, usernameTemplate: '', domain: '', allowOverride: ['host', 'port'], rdpClient: 'guac' }, password: PASSWORD,
    });

    const listings = [await cli('image', 'list', '--json'), JSON.stringify((await api.call('get_images', admin)).body), JSON.stringify(out)];
    for (const listing of listings) {
      expect(listing).toContain('Lab VNC');
      expect(listing).not.toContain(PASSWORD);
      expect(listing).not.toContain(row.password_encrypted);
    }

    // An update without --password-stdin keeps the stored password; --no-password removes it.
    expect(JSON.parse(await cli('image', 'add-server', 'Lab VNC', '--protocol', 'vnc', '--host', 'lab-desk.example.org', '--json'))).toMatchObject({ host: 'lab-desk.example.org', port: 5900, password_stored: true });
    expect((await api.app.get(ServerImagesService).targetOf(image.id)).password).toBe(PASSWORD);
    expect(JSON.parse(await cli('image', 'add-server', 'Lab VNC', '--protocol', 'vnc', '--host', '127.0.0.1', '--no-password', '--json'))).toMatchObject({ password_stored: false });
  });

  it('refuses bad settings, and a container image of the same name', async () => {
    await expect(cli('image', 'add-server', 'Bad', '--protocol', 'telnet', '--host', 'h')).rejects.toThrow('Server image Bad: protocol must be one of rdp, vnc, ssh (got telnet)');
    await expect(cli('image', 'add-server', 'Bad', '--protocol', 'vnc', '--host', 'a b')).rejects.toThrow('host must be a host name or an IP address');
    await expect(cli('image', 'add-server', 'Bad', '--protocol', 'vnc', '--host', 'h', '--port', '70000')).rejects.toThrow('port must be an integer from 1 to 65535');
    await expect(cli('image', 'add-server', 'Bad', '--protocol', 'vnc', '--host', 'h', '--allow-override', 'host,cmd')).rejects.toThrow('overridable fields are host, port, username, password, domain (got cmd)');
    await expect(cli('image', 'add-server', 'Bad', '--protocol', 'vnc', '--host', 'h', '--rdp-client', 'user')).rejects.toThrow('an rdp client option only applies to rdp servers');
    await cli('image', 'add', 'busybox:latest', '--friendly-name', 'Container One');
    await expect(cli('image', 'add-server', 'Container One', '--protocol', 'vnc', '--host', 'h')).rejects.toThrow('Image Container One is a container image');
    expect((await db.query("SELECT count(*)::int AS n FROM images WHERE friendly_name = 'Bad'"))[0].n).toBe(0);
  });

  it('refuses a password without SERVER_CREDENTIALS_KEY', async () => {
    await closeContext();
    process.env.SERVER_CREDENTIALS_KEY = '';
    try {
      await expect(cliWithStdin('pw\n', 'image', 'add-server', 'Keyless', '--protocol', 'rdp', '--host', 'h', '--password-stdin')).rejects.toThrow('SERVER_CREDENTIALS_KEY is not set');
      expect(JSON.parse(await cli('image', 'add-server', 'Keyless', '--protocol', 'rdp', '--host', 'h', '--username', '{username}', '--rdp-client', 'user', '--json')))
        .toMatchObject({ protocol: 'rdp', port: 3389, username: '{username}', rdp_client: 'user', password_stored: false });
    } finally {
      await closeContext();
      process.env.SERVER_CREDENTIALS_KEY = CREDENTIALS_KEY;
    }
  });

  it('request_workspace checks connection_info and rdp_client_type against the image before recording anything', async () => {
    const userId = (await api.call('create_user', admin, { target_user: { username: 'server-user' } })).body.user.user_id;
    await api.app.get(ServerImagesService).upsert({ friendlyName: 'Lab VNC', protocol: 'vnc', host: '127.0.0.1', allowOverride: ['host', 'port'] });
    const vnc = (await api.app.get(ImagesService).findByRef('Lab VNC')).id.replace(/-/g, '');
    const rdp = (await api.app.get(ImagesService).findByRef('Keyless')).id.replace(/-/g, '');
    const container = (await api.app.get(ImagesService).findByRef('Container One')).id.replace(/-/g, '');
    const refusals: Array<[object, string]> = [
      [{ image_id: vnc, connection_info: { password: 'x' } }, 'this image does not allow connection_info.password to be overridden'],
      [{ image_id: vnc, connection_info: { port: 0 } }, 'connection_info.port must be an integer from 1 to 65535'],
      [{ image_id: vnc, connection_info: { host: 'bad host' } }, 'connection_info.host must be a host name or an IP address'],
      [{ image_id: vnc, connection_info: { shell: '/bin/sh' } }, 'connection_info.shell is not a connection setting'],
      [{ image_id: vnc, rdp_client_type: 'RDP_CLIENT' }, 'rdp_client_type RDP_CLIENT only applies to RDP servers'],
      [{ image_id: vnc, environment: { LAB: '1' } }, 'is a server image; environment applies to container images'],
      [{ image_id: rdp }, 'rdp_client_type is required for this image: GUAC (web native) or RDP_CLIENT (your own RDP client)'],
      [{ image_id: container, connection_info: { host: 'h' } }, 'connection_info applies to RDP, VNC and SSH server images, not to container images'],
      [{ image_id: container, rdp_client_type: 'GUAC' }, 'rdp_client_type applies to RDP server images, not to container images'],
    ];
    for (const [body, message] of refusals) {
      const res = await api.call('request_workspace', admin, { user_id: userId, ...body });
      expect({ body, status: res.status, error: res.body.error_message }).toEqual({ body, status: 400, error: expect.stringContaining(message) });
    }
    // The bridge image is this deployment's setting: without it, an RDP server cannot be reached (409, not a 500).
    const unbridged = await api.call('request_workspace', admin, { user_id: userId, image_id: rdp, rdp_client_type: 'GUAC' });
    expect({ status: unbridged.status, error: unbridged.body.error_message }).toEqual({ status: 409, error: expect.stringContaining('SERVER_BRIDGE_IMAGE is not set') });
    expect((await db.query('SELECT count(*)::int AS n FROM workspaces'))[0].n).toBe(0);
  });

  it('is never staged: a staging config of a server image is refused', async () => {
    const zone = await api.app.get(ZonesService).ensure('default');
    const image = await api.app.get(ImagesService).findByRef('Lab VNC');
    const res = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zone.id.replace(/-/g, ''), image_id: image.id.replace(/-/g, ''), num_sessions: 1, expiration: 1 } });
    expect({ status: res.status, error: res.body.error_message }).toEqual({ status: 400, error: 'image_id: image Lab VNC reaches an existing server; only container images are staged' });
  });
});
