/**
 * Issue 19, hole 7: the worker connected wherever a server image or a request's connection_info pointed (loopback
 * ports, link-local and metadata addresses), its operational_message told closed from silent from open ports and
 * quoted a banner, and a request that overrode the host or port had the image's stored password sent there. Each
 * attack is made against the real api and worker; the targets are real TCP listeners on loopback that record what
 * reaches them.
 */
import { randomBytes } from 'node:crypto';
import { AddressInfo, createServer, Server, Socket } from 'node:net';
import { DataSource } from 'typeorm';
import { ImagesService, ServerImagesService } from '@ws/images';
import { vncAuthResponse } from '@ws/stream';
import { closeContext } from '../../apps/cli/src/context';
import { runCli as cli, runCliWithStdin } from './cli-runner';
import { freePort, TestApi, TestKey, waitFor } from './harness';

const CREDENTIALS_KEY = 'e2e-server-targets-key-0123456789abcdef';
const STORED_PASSWORD = 'Stored-pw-1';
/** What an operator sets for servers on the Docker host itself (the e2e suites' real servers): loopback only. */
const LOOPBACK_ALLOWED = { SERVER_TARGETS_ALLOW: '127.0.0.0/8' };

interface Listener {
  port: number;
  /** Connections accepted so far. */
  connections: number;
  /** The 16-byte answers to our VNC Authentication challenges, with the challenge each answered. */
  answers: Array<{ challenge: Buffer; response: Buffer }>;
  close(): Promise<void>;
}

/** A TCP listener on loopback that runs `onConnection` for each connection and counts them. */
async function listen(onConnection: (socket: Socket, listener: Listener) => void): Promise<Listener> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    listener.connections++;
    onConnection(socket, listener);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const listener: Listener = {
    port: (server.address() as AddressInfo).port, connections: 0, answers: [],
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
  return listener;
}

/**
 * A VNC server (RFB 3.8, VNC Authentication only) that records the answer to its challenge and refuses it: what
 * a target the request chose learns of the password sent to it.
 */
function recordingVncServer(): Promise<Listener> {
  return listen((socket, listener) => {
    const challenge = randomBytes(16);
    let received = Buffer.alloc(0);
    let stage: 'version' | 'type' | 'response' | 'done' = 'version';
    socket.write('RFB 003.008\n');
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (stage === 'version' && received.length >= 12) {
        received = received.subarray(12);
        stage = 'type';
        socket.write(Buffer.from([1, 2])); // one security type: VNC Authentication
      }
      if (stage === 'type' && received.length >= 1) {
        received = received.subarray(1);
        stage = 'response';
        socket.write(challenge);
      }
      if (stage === 'response' && received.length >= 16) {
        listener.answers.push({ challenge, response: Buffer.from(received.subarray(0, 16)) });
        stage = 'done';
        const reason = Buffer.from('Authentication failed');
        const failed = Buffer.alloc(8);
        failed.writeUInt32BE(1, 0);
        failed.writeUInt32BE(reason.length, 4);
        socket.end(Buffer.concat([failed, reason]));
      }
    });
  });
}

describe('server targets: no SSRF from the worker (issue 19, hole 7)', () => {
  describe('with the default policy (no private or loopback targets)', () => {
    let api: TestApi;
    let admin: TestKey;
    let db: DataSource;
    let userId: string;
    const saved = { ...process.env };

    beforeAll(async () => {
      api = await TestApi.start({ SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY });
      Object.assign(process.env, {
        DATABASE_NAME: api.config.DATABASE_NAME, REDIS_PREFIX: api.config.REDIS_PREFIX, DEPLOYMENT_ID: api.config.DEPLOYMENT_ID, LOG_LEVEL: 'error',
        SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY, SERVER_TARGETS_ALLOW: '', SERVER_TARGETS_ALLOW_PRIVATE: 'false',
      });
      db = api.app.get(DataSource);
      admin = await api.key(['Global Admin']);
      userId = (await api.call('create_user', admin, { target_user: { username: 'ssrf-user' } })).body.user.user_id;
    });
    afterAll(async () => {
      await closeContext();
      process.env = saved;
      await api?.close();
    });

    it('image add-server refuses loopback, link-local, metadata and private hosts, as written or once resolved', async () => {
      const refusals: Array<[string, string]> = [
        ['127.0.0.1', 'is a loopback address (this machine); the operator allows such targets only by listing them in SERVER_TARGETS_ALLOW'],
        ['localhost', 'is a loopback address (this machine)'],
        // glibc reads 0x7f000001 as 127.0.0.1: a name to the literal check, loopback once resolved.
        ['0x7f000001', 'resolves to a loopback address (this machine)'],
        ['::1', 'is a loopback address'],
        ['::ffff:127.0.0.1', 'is a loopback address'],
        ['169.254.169.254', 'is a cloud metadata service address, which is never a server target'],
        ['metadata.google.internal', 'is a cloud metadata service address, which is never a server target'],
        ['fe80::1', 'is a link-local address'],
        ['10.0.0.5', 'is a private-network address; the operator allows private targets with SERVER_TARGETS_ALLOW_PRIVATE=true or SERVER_TARGETS_ALLOW'],
        ['0.0.0.0', 'is an unspecified address, which is never a server target'],
      ];
      for (const [host, reason] of refusals) {
        await expect(runCliWithStdin(`${STORED_PASSWORD}\n`, 'image', 'add-server', 'Probe', '--protocol', 'vnc', '--host', host, '--password-stdin'))
          .rejects.toThrow(`Server image Probe: host ${host} is not an allowed server target: it ${reason}`);
      }
      expect((await db.query("SELECT count(*)::int AS n FROM images WHERE friendly_name = 'Probe'"))[0].n).toBe(0);
      // A public address is a server target like before.
      expect(JSON.parse(await cli('image', 'add-server', 'Probe', '--protocol', 'vnc', '--host', '8.8.8.8', '--json'))).toMatchObject({ host: '8.8.8.8', port: 5900 });
    });

    it('request_workspace refuses such a connection_info.host (400 naming it), and a host or port override without the request\'s own password', async () => {
      const { image } = await api.app.get(ServerImagesService).upsert({
        friendlyName: 'Public VNC', protocol: 'vnc', host: '8.8.8.8', password: STORED_PASSWORD, allowOverride: ['host', 'port', 'password'],
      });
      const imageId = image.id.replace(/-/g, '');
      const hosts: Array<[string, RegExp]> = [
        ['127.0.0.1', /it is a loopback address/], ['localhost', /it is a loopback address/], ['LOCALHOST', /it is a loopback address/],
        ['0x7f000001', /it resolves to a loopback address/], ['::ffff:127.0.0.1', /it is a loopback address/], ['::ffff:7f00:1', /it is a loopback address/],
        ['::1', /it is a loopback address/], ['169.254.169.254', /it is a cloud metadata service address/], ['0xa9fea9fe', /it resolves to a cloud metadata service address/],
        ['::ffff:169.254.169.254', /it is a cloud metadata service address/], ['fd00:ec2::254', /it is a cloud metadata service address/],
        ['metadata.google.internal', /it is a cloud metadata service address/], ['169.254.1.1', /it is a link-local address/], ['fe80::1', /it is a link-local address/],
        ['10.1.2.3', /it is a private-network address/], ['172.17.0.1', /it is a private-network address/], ['192.168.0.10', /it is a private-network address/],
        ['100.64.0.1', /it is a private-network address/], ['fd12:3456::1', /it is a private-network address/], ['::ffff:10.1.2.3', /it is a private-network address/],
        ['0.0.0.0', /it is an unspecified address/], ['::', /it is an unspecified address/], ['224.0.0.1', /it is a multicast address/], ['255.255.255.255', /it is a broadcast address/],
      ];
      for (const [host, reason] of hosts) {
        const res = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId, connection_info: { host, password: 'my-own' } });
        expect({ host, status: res.status, error: res.body.error_message }).toEqual({
          host, status: 400, error: expect.stringMatching(new RegExp(`^connection_info.host ${host.replace(/[.*+?^$()|[\]\\]/g, '\\$&')} is not an allowed server target: ${reason.source}`)),
        });
      }
      // The stored password answers only the image's own server.
      for (const [info, message] of [
        [{ host: '8.8.4.4' }, 'connection_info.password is required with connection_info.host: the image\'s stored password is sent only to the image\'s own server'],
        [{ port: 5999 }, 'connection_info.password is required with connection_info.port'],
        [{ host: '8.8.4.4', port: 5999 }, 'connection_info.password is required with connection_info.host and connection_info.port'],
      ] as Array<[object, string]>) {
        const res = await api.call('request_workspace', admin, { user_id: userId, image_id: imageId, connection_info: info });
        expect({ info, status: res.status, error: res.body.error_message }).toEqual({ info, status: 400, error: expect.stringContaining(message) });
      }
      const noPasswordOverride = (await api.app.get(ServerImagesService).upsert({ friendlyName: 'Fixed password VNC', protocol: 'vnc', host: '8.8.8.8', password: STORED_PASSWORD, allowOverride: ['host'] })).image;
      const refused = await api.call('request_workspace', admin, { user_id: userId, image_id: noPasswordOverride.id.replace(/-/g, ''), connection_info: { host: '8.8.4.4' } });
      expect({ status: refused.status, error: refused.body.error_message }).toEqual({
        status: 400, error: expect.stringContaining('connection_info.host cannot be overridden without a password of the request\'s own, and this image does not allow connection_info.password'),
      });
      expect((await db.query('SELECT count(*)::int AS n FROM workspaces'))[0].n).toBe(0);
    });

    it('an image whose own host the policy no longer allows is the image\'s 409, before anything is recorded', async () => {
      // Stored while the operator allowed loopback (an earlier setting): refused now at every request.
      await api.app.get(DataSource).query("UPDATE server_targets SET host = '127.0.0.1' WHERE image_id = (SELECT id FROM images WHERE friendly_name = 'Public VNC')");
      const image = await api.app.get(ImagesService).findByRef('Public VNC');
      const res = await api.call('request_workspace', admin, { user_id: userId, image_id: image.id.replace(/-/g, '') });
      expect({ status: res.status, error: res.body.error_message }).toEqual({
        status: 409, error: expect.stringMatching(/^Image Public VNC \([0-9a-f]{32}\): host 127\.0\.0\.1 is not an allowed server target: it is a loopback address/),
      });
      expect((await db.query('SELECT count(*)::int AS n FROM workspaces'))[0].n).toBe(0);
    });
  });

  describe('with loopback allowed by the operator (SERVER_TARGETS_ALLOW=127.0.0.0/8)', () => {
    let api: TestApi;
    let key: TestKey;
    let userId: string;
    const listeners: Listener[] = [];

    beforeAll(async () => {
      api = await TestApi.start({ SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY, WORKER_LOCK_MS: 3000, ...LOOPBACK_ALLOWED }, { worker: true });
      const admin = await api.key(['Global Admin']);
      key = await api.key(['Users Auth Session', 'User']);
      userId = (await api.call('create_user', admin, { target_user: { username: 'ssrf-user-2' } })).body.user.user_id;
    });
    afterAll(async () => {
      for (const listener of listeners) await listener.close();
      await api?.close();
    });

    async function addImage(definition: Partial<Parameters<ServerImagesService['upsert']>[0]> & { host: string; port: number }): Promise<string> {
      const { image } = await api.app.get(ServerImagesService).upsert({ friendlyName: `VNC ${randomBytes(3).toString('hex')}`, protocol: 'vnc', ...definition });
      return image.id.replace(/-/g, '');
    }

    async function request(body: object): Promise<string> {
      const res = await api.call('request_workspace', key, { user_id: userId, ...body });
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: expect.objectContaining({ workspace_id: expect.any(String) }) });
      return res.body.workspace_id;
    }

    /** Polls until the workspace failed, and answers its operational_message. */
    function failureOf(workspaceId: string): Promise<string> {
      return waitFor(`workspace ${workspaceId} failed`, async () => {
        const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
        if (res.body.workspace?.operational_status === 'running') throw new Error(`workspace ${workspaceId} runs, expected a failure`);
        return res.body.operational_status === 'stopped' || res.body.workspace?.operational_status === 'failed' ? (res.body.operational_message ?? res.body.workspace.operational_message) as string : undefined;
      }, 120_000, 200);
    }

    it('sends the stored password only to the image\'s own server; a request\'s own target gets only the request\'s password', async () => {
      const own = await recordingVncServer();
      const chosen = await recordingVncServer();
      listeners.push(own, chosen);
      const imageId = await addImage({ host: '127.0.0.1', port: own.port, password: STORED_PASSWORD, allowOverride: ['port', 'password'] });

      // Positive control: the image's own server is asked with the stored password (and refuses it here).
      expect(await failureOf(await request({ image_id: imageId }))).toBe(`Could not start the workspace: VNC server 127.0.0.1:${own.port} refused the credentials (wrong password)`);
      expect(own.answers).toHaveLength(1);
      expect(own.answers[0].response.equals(vncAuthResponse(STORED_PASSWORD, own.answers[0].challenge))).toBe(true);

      // The attack: the request's own port without a password is refused before anything connects anywhere.
      const refused = await api.call('request_workspace', key, { user_id: userId, image_id: imageId, connection_info: { port: chosen.port } });
      expect({ status: refused.status, error: refused.body.error_message }).toEqual({ status: 400, error: expect.stringContaining('connection_info.password is required with connection_info.port') });
      expect(chosen.connections).toBe(0);

      // With the request's own password, that is what the chosen target gets: never an answer made with the stored one.
      await failureOf(await request({ image_id: imageId, connection_info: { port: chosen.port, password: 'attacker-guess' } }));
      expect(chosen.answers).toHaveLength(1);
      const [{ challenge, response }] = chosen.answers;
      expect(response.equals(vncAuthResponse('attacker-guess', challenge))).toBe(true);
      expect(response.equals(vncAuthResponse(STORED_PASSWORD, challenge))).toBe(false);
    });

    it('says the same for a closed port, a silent one and another service, and quotes nothing the target sent', async () => {
      const banner = await listen((socket) => socket.write('SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3 internal-build-7\r\n'));
      const http = await listen((socket) => socket.end('HTTP/1.1 400 Bad Request\r\nServer: secret-admin/1.0\r\n\r\n'));
      const silent = await listen(() => undefined);
      listeners.push(banner, http, silent);
      const closed = await freePort();
      const imageId = await addImage({ host: '127.0.0.1', port: 5900, password: STORED_PASSWORD, allowOverride: ['port', 'password'] });
      const messages: Record<string, string> = {};
      for (const [name, port] of [['banner', banner.port], ['http', http.port], ['silent', silent.port], ['closed', closed]] as Array<[string, number]>) {
        messages[name] = (await failureOf(await request({ image_id: imageId, connection_info: { port, password: 'mine' } }))).replace(`:${port},`, ':PORT,');
      }
      for (const message of Object.values(messages)) {
        expect(message).toBe('Could not start the workspace: Could not connect to the VNC server 127.0.0.1:PORT, or it did not answer as a VNC server');
        expect(message).not.toMatch(/SSH-2\.0|OpenSSH|HTTP|secret-admin|refused the connection|timed out|closed/i);
      }
      expect([banner.connections, http.connections, silent.connections]).toEqual([1, 1, 1]);
    });

    it('the worker checks the address itself, after its own lookup, and connects to nothing it refuses', async () => {
      const target = await recordingVncServer();
      listeners.push(target);
      // The api allows loopback, this worker does not: as if the name changed, or the policy, between request and provision.
      await api.stopWorker();
      await api.startWorker({ SERVER_TARGETS_ALLOW: '' });
      try {
        for (const host of ['127.0.0.1', '0x7f000001']) {
          const imageId = await addImage({ host, port: target.port, password: STORED_PASSWORD });
          const verb = host === '127.0.0.1' ? 'is' : 'resolves to';
          expect(await failureOf(await request({ image_id: imageId })))
            .toBe(`Could not start the workspace: The VNC server ${host}:${target.port} is not an allowed server target: it ${verb} a loopback address (this machine); the operator allows such targets only by listing them in SERVER_TARGETS_ALLOW`);
        }
        expect(target.connections).toBe(0);
      } finally {
        await api.stopWorker();
        await api.startWorker();
      }
      // Positive control, the same worker with the allowance: it connects to the address it checked, which the workspace keeps.
      const imageId = await addImage({ host: '0x7f000001', port: target.port, password: STORED_PASSWORD });
      const workspaceId = await request({ image_id: imageId });
      expect(await failureOf(workspaceId)).toBe(`Could not start the workspace: VNC server 0x7f000001:${target.port} refused the credentials (wrong password)`);
      expect(target.connections).toBe(1);
      const [row] = await api.app.get(DataSource).query('SELECT server_connection FROM workspaces WHERE id = $1', [workspaceId]);
      expect(row.server_connection).toMatchObject({ host: '0x7f000001', address: '127.0.0.1' });
    });
  });
});
