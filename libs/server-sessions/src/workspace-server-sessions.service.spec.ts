import { createHmac } from 'node:crypto';
import { ApiError, AppConfig } from '@ws/common';
import type { Image, ServerImagesService } from '@ws/images';
import { ServerCredentialError, checkServerTarget } from '@ws/images';
import { Workspace } from '@ws/workspaces';
import type { WorkspaceServerConnection } from '@ws/workspaces';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';

const KEY = 'unit-server-sessions-key-0123456789abcdef';
/** An RDP server image whose client the request chooses, with a stored password. */
const rdpImage = {
  targetOf: async () => ({ target: checkServerTarget({ protocol: 'rdp', host: '10.0.0.7', usernameTemplate: '{username}', rdpClient: 'user' }), password: 'stored-pw' }),
} as unknown as ServerImagesService;
const sessionsWith = (key: string, images = {} as ServerImagesService, targets: Partial<AppConfig> = { SERVER_TARGETS_ALLOW_PRIVATE: true }) =>
  new WorkspaceServerSessions({
    SERVER_CREDENTIALS_KEY: key, SERVER_BRIDGE_IMAGE: 'desktop:1', RDP_CLIENT_CREDENTIAL_TTL_SECONDS: 300, SERVER_TARGETS_ALLOW_PRIVATE: false, SERVER_TARGETS_ALLOW: '', ...targets,
  } as AppConfig, images);

const connection = (mode: WorkspaceServerConnection['mode']): WorkspaceServerConnection => ({
  protocol: mode === 'direct' ? 'vnc' : 'rdp', host: '10.0.0.7', port: mode === 'direct' ? 5901 : 3389, username: 'tester', domain: '',
  rdpClientType: mode === 'relay' ? 'RDP_CLIENT' : mode === 'bridge' ? 'GUAC' : null, mode,
});

function workspace(fields: Partial<Workspace>): Workspace {
  return Object.assign(new Workspace(), {
    id: '0123456789abcdef0123456789abcdef', status: 'running', token: 'workspace-token', serverConnection: null, serverPasswordEncrypted: null, relaySecret: null,
    hostPorts: {}, server: { publishHost: '127.0.0.1', hostname: 'docker-1.example.org' }, ...fields,
  });
}

describe('WorkspaceServerSessions', () => {
  const sessions = sessionsWith(KEY);

  it('streams a VNC server image directly with its sealed password, a container or bridge from its published port with the token', () => {
    const direct = workspace({ serverConnection: connection('direct'), server: null });
    direct.serverPasswordEncrypted = sessions.seal('vnc-pw', direct.id);
    expect(sessions.vncEndpointOf(direct)).toEqual({ host: '10.0.0.7', port: 5901, password: 'vnc-pw' });
    expect(sessions.vncEndpointOf(workspace({ hostPorts: { vnc: 49000 } }))).toEqual({ host: '127.0.0.1', port: 49000, password: 'workspace-token' });
    expect(sessions.vncEndpointOf(workspace({ serverConnection: connection('bridge'), hostPorts: { vnc: 49001 } }))).toEqual({ host: '127.0.0.1', port: 49001, password: 'workspace-token' });
    // A native RDP client's relay has no desktop stream; a container not yet published has none yet.
    expect(sessions.vncEndpointOf(workspace({ serverConnection: connection('relay'), hostPorts: { rdp: 49002 } }))).toBeNull();
    expect(sessions.vncEndpointOf(workspace({}))).toBeNull();
  });

  it('streams a VNC server from the address the worker checked, and refuses one the policy no longer allows', () => {
    const checked = workspace({ serverConnection: { ...connection('direct'), host: 'desk.example.org', address: '10.0.0.8' }, server: null });
    expect(sessions.vncEndpointOf(checked)).toEqual({ host: '10.0.0.8', port: 5901, password: '' });
    // No address (provisioned before addresses were kept) and a name: never looked up here.
    expect(() => sessions.vncEndpointOf(workspace({ serverConnection: { ...connection('direct'), host: 'desk.example.org' }, server: null })))
      .toThrow(expect.objectContaining({ code: 'invalid_state', message: expect.stringContaining('is not an allowed server target') }));
    expect(() => sessionsWith(KEY, undefined, {}).vncEndpointOf(checked)).toThrow(expect.objectContaining({ code: 'invalid_state' }));
  });

  it('refuses a request whose target is not allowed: its own host as a 400, the image\'s as a 409', async () => {
    const image = { id: '00000000000000000000000000000001', friendlyName: 'Lab RDP' } as Image;
    await expect(sessionsWith(KEY, rdpImage, {}).resolve(image, { rdp_client_type: 'GUAC' }, 'ann'))
      .rejects.toMatchObject({ code: 'invalid_state', message: expect.stringMatching(/^Image Lab RDP \(0+1\): host 10.0.0.7 is not an allowed server target: it is a private-network address/) });
    const overridable = {
      targetOf: async () => ({ target: checkServerTarget({ protocol: 'rdp', host: '10.0.0.7', rdpClient: 'guac', allowOverride: ['host', 'password'] }), password: 'stored-pw' }),
    } as unknown as ServerImagesService;
    for (const host of ['127.0.0.1', 'localhost', '::ffff:127.0.0.1', '169.254.169.254', 'metadata.google.internal', '0x7f000001']) {
      await expect(sessionsWith(KEY, overridable).resolve(image, { connection_info: { host, password: 'mine' } }, 'ann'))
        .rejects.toMatchObject({ code: 'invalid_request', message: expect.stringMatching(new RegExp(`^connection_info.host ${host.replace(/\./g, '\\.')} is not an allowed server target`)) });
    }
  });

  it('keeps no password when there is none, and answers a password sealed under another key as a 409', () => {
    expect(sessions.seal('', 'w')).toBeNull();
    const sealedElsewhere = sessionsWith(`${KEY}-other`).seal('pw', '0123456789abcdef0123456789abcdef');
    const stale = workspace({ serverConnection: connection('direct'), serverPasswordEncrypted: sealedElsewhere, server: null });
    expect(() => sessions.vncEndpointOf(stale)).toThrow(ApiError);
    expect(() => sessions.passwordOf(stale)).toThrow(expect.objectContaining({ code: 'invalid_state', message: expect.stringMatching(/does not decrypt.*request a new workspace/) }));
    // The password is bound to its workspace: a sealed value copied onto another row does not decrypt.
    const sealed = sessions.seal('pw', '0123456789abcdef0123456789abcdef');
    expect(() => sessions.passwordOf({ id: 'fedcba9876543210fedcba9876543210', serverPasswordEncrypted: sealed })).toThrow(ApiError);
  });

  it('keeps the server password for a bridge, none for a relay (whose user answers the logon), and refuses one to keep without a key', async () => {
    const image = { id: '00000000000000000000000000000001', friendlyName: 'Lab RDP' } as Image;
    const bridge = await sessionsWith(KEY, rdpImage).resolve(image, { rdp_client_type: 'GUAC' }, 'ann');
    expect(bridge).toEqual({ connection: expect.objectContaining({ mode: 'bridge', username: 'ann' }), password: 'stored-pw' });
    const keyless = sessionsWith('', rdpImage);
    expect(await keyless.resolve(image, { rdp_client_type: 'RDP_CLIENT' }, 'ann')).toEqual({ connection: expect.objectContaining({ mode: 'relay' }), password: '' });
    await expect(keyless.resolve(image, { rdp_client_type: 'GUAC' }, 'ann')).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringContaining('SERVER_CREDENTIALS_KEY is not set') });
  });

  it('a stored password that no longer decrypts is the image\'s 409; a database failure stays itself', async () => {
    const image = { id: '00000000000000000000000000000001', friendlyName: 'Lab RDP' } as Image;
    const undecryptable = { targetOf: async () => { throw new ServerCredentialError('the stored server credential does not decrypt'); } } as unknown as ServerImagesService;
    await expect(sessionsWith(KEY, undecryptable).resolve(image, { rdp_client_type: 'GUAC' }, 'ann'))
      .rejects.toMatchObject({ code: 'invalid_state', message: expect.stringContaining('store the password again') });
    const down = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    const databaseDown = { targetOf: async () => { throw down; } } as unknown as ServerImagesService;
    await expect(sessionsWith(KEY, databaseDown).resolve(image, { rdp_client_type: 'GUAC' }, 'ann')).rejects.toBe(down);
  });

  it('answers get_rdp_client_connection_info for a running relay only, at the publish address or the host name when published on all', () => {
    const now = new Date('2026-11-24T03:00:00Z');
    const relay = workspace({ serverConnection: connection('relay'), hostPorts: { rdp: 49002 }, relaySecret: 'relay-key' });
    const info = sessions.rdpClientConnection(relay, now);
    expect(info).toMatchObject({ host: '127.0.0.1', port: 49002, username: 'tester', expires: '2026-11-24 03:05:00.000000' });
    const credential = /pcb:s:(\S+)\r\n/.exec(info.file)?.[1] ?? '';
    expect(credential).toMatch(new RegExp(`^ws1\\.0123456789abcdef0123456789abcdef\\.${now.getTime() / 1000 + 300}\\.[0-9a-f]{16}\\.[0-9a-f]{64}$`));
    // Signed with the relay's own key, never the token the Workspace object shows.
    const [signed, mac] = [credential.slice(0, credential.lastIndexOf('.')), credential.slice(credential.lastIndexOf('.') + 1)];
    expect(mac).toBe(createHmac('sha256', 'relay-key').update(signed).digest('hex'));
    expect(mac).not.toBe(createHmac('sha256', 'workspace-token').update(signed).digest('hex'));
    const everywhere = workspace({ serverConnection: connection('relay'), hostPorts: { rdp: 49002 }, relaySecret: 'relay-key', server: { publishHost: '0.0.0.0', hostname: 'docker-1.example.org' } as Workspace['server'] });
    expect(sessions.rdpClientConnection(everywhere, now).host).toBe('docker-1.example.org');
    expect(() => sessions.rdpClientConnection(workspace({ serverConnection: connection('bridge'), hostPorts: { vnc: 1 } }))).toThrow(expect.objectContaining({ code: 'invalid_request' }));
    expect(() => sessions.rdpClientConnection(workspace({ serverConnection: connection('relay'), status: 'starting' }))).toThrow(expect.objectContaining({ code: 'invalid_state' }));
  });
});
