import { ApiError } from '@ws/common';
import { ServerCredentialCipher } from './server-credentials';
import { checkServerTarget, chooseRdpClientType, isValidHost, resolveConnection, sessionModeOf } from './server-target';

const vnc = checkServerTarget({ protocol: 'vnc', host: '127.0.0.1', port: 5901, allowOverride: ['host', 'port'] });
const rdp = (rdpClient: string) => checkServerTarget({ protocol: 'RDP', host: 'lab-1.example.org', usernameTemplate: 'corp\\{username}', domain: 'CORP', rdpClient, allowOverride: ['username', 'password', 'domain'] });

const badRequest = (run: () => unknown, message: RegExp) => {
  let thrown: unknown;
  try {
    run();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(ApiError);
  expect((thrown as ApiError).message).toMatch(message);
};

describe('server targets', () => {
  it('accepts host names and IP addresses, nothing else', () => {
    for (const host of ['127.0.0.1', '::1', 'fe80::1', 'lab-1.example.org', 'localhost', 'host.']) expect(isValidHost(host)).toBe(true);
    for (const host of ['', '-a.org', 'a_b.org', 'a b', '999.1.1.1', 'a..b', 'x'.repeat(64), 'h:80', 'http://h']) expect(isValidHost(host)).toBe(false);
  });

  it('checks what an operator defines and fills the protocol default port', () => {
    expect(rdp('user')).toMatchObject({ protocol: 'rdp', port: 3389, rdpClient: 'user' });
    expect(checkServerTarget({ protocol: 'ssh', host: 'h' })).toMatchObject({ port: 22, rdpClient: 'guac', allowOverride: [] });
    expect(() => checkServerTarget({ protocol: 'telnet', host: 'h' })).toThrow(/protocol/);
    expect(() => checkServerTarget({ protocol: 'vnc', host: 'h', port: 70000 })).toThrow(/port/);
    expect(() => checkServerTarget({ protocol: 'vnc', host: 'h', allowOverride: ['cmd'] })).toThrow(/overridable/);
    expect(() => checkServerTarget({ protocol: 'vnc', host: 'h', rdpClient: 'rdp_client' })).toThrow(/only applies to rdp/);
    expect(() => checkServerTarget({ protocol: 'rdp', host: 'h', rdpClient: 'native' })).toThrow(/rdp client/);
    expect(() => checkServerTarget({ protocol: 'rdp', host: 'h', usernameTemplate: 'a\nb' })).toThrow(/username/);
  });

  it('applies allowed overrides, validated field by field', () => {
    expect(resolveConnection(vnc, '', { connection_info: { host: 'desk-2', port: 5902 } }, 'alice'))
      .toEqual({ protocol: 'vnc', host: 'desk-2', port: 5902, username: '', password: '', domain: '', rdpClientType: null });
    expect(resolveConnection(vnc, 'secret', {}, 'alice')).toMatchObject({ host: '127.0.0.1', port: 5901 });
    badRequest(() => resolveConnection(vnc, '', { connection_info: { password: 'x' } }, 'a'), /does not allow connection_info.password/);
    badRequest(() => resolveConnection(vnc, '', { connection_info: { cmd: 'x' } }, 'a'), /connection_info.cmd is not a connection setting/);
    badRequest(() => resolveConnection(vnc, '', { connection_info: { port: 0 } }, 'a'), /port must be an integer/);
    badRequest(() => resolveConnection(vnc, '', { connection_info: { port: '5900' } }, 'a'), /port must be an integer/);
    badRequest(() => resolveConnection(vnc, '', { connection_info: { host: 'a b' } }, 'a'), /host must be/);
    badRequest(() => resolveConnection(vnc, '', { connection_info: [] }, 'a'), /must be an object/);
  });

  it('never sends the stored password to a host or port the request chose', () => {
    const vncWithPassword = checkServerTarget({ protocol: 'vnc', host: 'desk-1.example.org', port: 5901, allowOverride: ['host', 'port', 'password'] });
    badRequest(() => resolveConnection(vncWithPassword, 'stored', { connection_info: { host: 'desk-2.example.org' } }, 'a'),
      /^connection_info.password is required with connection_info.host: the image's stored password is sent only to the image's own server$/);
    badRequest(() => resolveConnection(vncWithPassword, 'stored', { connection_info: { port: 5902 } }, 'a'), /connection_info.password is required with connection_info.port/);
    badRequest(() => resolveConnection(vnc, 'stored', { connection_info: { host: 'desk-2', port: 5902 } }, 'a'),
      /^connection_info.host and connection_info.port cannot be overridden without a password of the request's own, and this image does not allow connection_info.password/);
    // The request's own password goes to its own target; the image's own host and port named again are no override.
    expect(resolveConnection(vncWithPassword, 'stored', { connection_info: { host: 'desk-2.example.org', password: 'mine' } }, 'a')).toMatchObject({ host: 'desk-2.example.org', password: 'mine' });
    expect(resolveConnection(vncWithPassword, 'stored', { connection_info: { host: 'desk-1.example.org', port: 5901 } }, 'a')).toMatchObject({ password: 'stored' });
    // A native RDP client's relay never uses a stored password: its host may be overridden alone.
    const rdpRelay = checkServerTarget({ protocol: 'rdp', host: 'lab-1.example.org', rdpClient: 'rdp_client', allowOverride: ['host'] });
    expect(resolveConnection(rdpRelay, 'stored', { connection_info: { host: 'lab-2.example.org' } }, 'a')).toMatchObject({ host: 'lab-2.example.org', rdpClientType: 'RDP_CLIENT' });
    const rdpBridge = checkServerTarget({ protocol: 'rdp', host: 'lab-1.example.org', rdpClient: 'user', allowOverride: ['host'] });
    badRequest(() => resolveConnection(rdpBridge, 'stored', { connection_info: { host: 'lab-2.example.org' }, rdp_client_type: 'GUAC' }, 'a'), /cannot be overridden without a password/);
  });

  it('fills the username template with the requesting user and lets allowed fields override it', () => {
    expect(resolveConnection(rdp('guac'), 'pw', {}, 'alice')).toMatchObject({ username: 'corp\\alice', password: 'pw', domain: 'CORP', rdpClientType: 'GUAC' });
    expect(resolveConnection(rdp('guac'), 'pw', { connection_info: { username: 'bob', password: 'p2', domain: 'LAB' } }, 'alice'))
      .toMatchObject({ username: 'bob', password: 'p2', domain: 'LAB' });
    badRequest(() => resolveConnection(rdp('guac'), 'pw', { connection_info: { password: 7 } }, 'a'), /password must be a string/);
  });

  it('requires rdp_client_type when user selectable and refuses the other one when fixed', () => {
    badRequest(() => chooseRdpClientType(rdp('user'), undefined), /rdp_client_type is required/);
    expect(chooseRdpClientType(rdp('user'), 'RDP_CLIENT')).toBe('RDP_CLIENT');
    expect(chooseRdpClientType(rdp('rdp_client'), undefined)).toBe('RDP_CLIENT');
    badRequest(() => chooseRdpClientType(rdp('guac'), 'RDP_CLIENT'), /GUAC only/);
    badRequest(() => chooseRdpClientType(rdp('user'), 'VNC'), /must be GUAC or RDP_CLIENT/);
    badRequest(() => chooseRdpClientType(vnc, 'RDP_CLIENT'), /only applies to RDP servers/);
    expect(chooseRdpClientType(vnc, 'GUAC')).toBeNull();
  });
});

describe('server credential cipher', () => {
  const key = 'k'.repeat(32);

  it('round-trips, never stores the plaintext, and binds the value to its image', () => {
    const cipher = new ServerCredentialCipher(key);
    const stored = cipher.encrypt('hunter2', 'image-1');
    expect(stored).toMatch(/^v1:/);
    expect(stored).not.toContain('hunter2');
    expect(cipher.encrypt('hunter2', 'image-1')).not.toBe(stored);
    expect(cipher.decrypt(stored, 'image-1')).toBe('hunter2');
    expect(() => cipher.decrypt(stored, 'image-2')).toThrow(/does not decrypt/);
    expect(() => new ServerCredentialCipher('z'.repeat(32)).decrypt(stored, 'image-1')).toThrow(/does not decrypt/);
    const [v, iv, tag, body] = stored.split(':');
    const flipped = Buffer.from(body, 'base64url');
    flipped[0] ^= 1;
    expect(() => cipher.decrypt([v, iv, tag, flipped.toString('base64url')].join(':'), 'image-1')).toThrow(/does not decrypt/);
    expect(() => cipher.decrypt('plain', 'image-1')).toThrow(/not a stored server credential/);
  });

  it('refuses short keys, and storing a password without a key', () => {
    expect(() => new ServerCredentialCipher('short')).toThrow(/at least 32/);
    const none = new ServerCredentialCipher('');
    expect(none.configured).toBe(false);
    expect(() => none.encrypt('pw', 'image-1')).toThrow(/SERVER_CREDENTIALS_KEY is not set/);
  });

  it('reaches VNC directly, RDP for native clients through the relay, and RDP in the browser and SSH through a bridge', () => {
    expect(sessionModeOf({ protocol: 'vnc', rdpClientType: null })).toBe('direct');
    expect(sessionModeOf({ protocol: 'rdp', rdpClientType: 'RDP_CLIENT' })).toBe('relay');
    expect(sessionModeOf({ protocol: 'rdp', rdpClientType: 'GUAC' })).toBe('bridge');
    expect(sessionModeOf({ protocol: 'ssh', rdpClientType: null })).toBe('bridge');
  });
});
