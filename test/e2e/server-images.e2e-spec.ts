import { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { ImagesService, ServerImagesService } from '@ws/images';
import { closeContext } from '../../apps/cli/src/context';
import { runCli as cli } from './cli-runner';
import { TestApi, TestKey } from './harness';

const CREDENTIALS_KEY = 'e2e-server-credentials-key-0123456789';
const PASSWORD = 'vnc-Secret-4711';

/** Runs the CLI with `input` as its stdin (what an operator pipes into --password-stdin). */
async function cliWithStdin(input: string, ...args: string[]): Promise<string> {
  const original = Object.getOwnPropertyDescriptor(process, 'stdin') as PropertyDescriptor;
  Object.defineProperty(process, 'stdin', { value: Readable.from([Buffer.from(input)]), configurable: true });
  try {
    return await cli(...args);
  } finally {
    Object.defineProperty(process, 'stdin', original);
  }
}

/**
 * Server images (issue 14, first step): `image add-server` stores the target with its password encrypted under
 * SERVER_CREDENTIALS_KEY, no listing shows the password, bad settings are refused, and request_workspace refuses a
 * server image with a 400 until server sessions are wired.
 */
describe('server images', () => {
  let api: TestApi;
  let admin: TestKey;
  let db: DataSource;
  const saved = { ...process.env };

  beforeAll(async () => {
    api = await TestApi.start({ SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY });
    Object.assign(process.env, {
      DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, DEPLOYMENT_ID: api.config.DEPLOYMENT_ID, LOG_LEVEL: 'error', SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY,
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

  it('request_workspace refuses a server image with a 400 until server sessions are wired', async () => {
    const userId = (await api.call('create_user', admin, { target_user: { username: 'server-user' } })).body.user.user_id;
    const image = await api.app.get(ImagesService).findByRef('Lab VNC');
    const res = await api.call('request_workspace', admin, { user_id: userId, image_id: image.id.replace(/-/g, '') });
    expect({ status: res.status, body: res.body }).toEqual({ status: 400, body: { error_message: expect.stringContaining('is a server image; server sessions cannot be requested yet') } });
  });
});
