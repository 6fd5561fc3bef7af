import { createHmac } from 'node:crypto';
import { mintRelayCredential, rdpFile, rdpUrl } from './rdp-client-connection';

describe('RDP client connection info', () => {
  const expires = new Date('2026-11-24T03:00:00Z');

  it('mints ws1.<id>.<expiry>.<nonce>.<hmac> that only the workspace secret signs', () => {
    const credential = mintRelayCredential('secret-1', 'abc123', expires, '00112233aabbccdd');
    const [version, id, expiry, nonce, mac] = credential.split('.');
    expect({ version, id, expiry, nonce }).toEqual({ version: 'ws1', id: 'abc123', expiry: String(expires.getTime() / 1000), nonce: '00112233aabbccdd' });
    expect(mac).toBe(createHmac('sha256', 'secret-1').update(`ws1.abc123.${expiry}.${nonce}`).digest('hex'));
    expect(mintRelayCredential('secret-2', 'abc123', expires, nonce)).not.toBe(credential);
    expect(mintRelayCredential('secret-1', 'abc123', expires)).not.toBe(mintRelayCredential('secret-1', 'abc123', expires));
  });

  it('writes a .rdp file and an rdp:// url with the relay address, the username and the credential, never a password', () => {
    const target = { host: '127.0.0.1', port: 49153, username: 'tester', domain: '', credential: 'ws1.a.1.b.c' };
    const file = rdpFile(target);
    expect(file.split('\r\n')).toEqual(['full address:s:127.0.0.1:49153', 'username:s:tester', 'pcb:s:ws1.a.1.b.c', 'prompt for credentials:i:1', '']);
    expect(file).not.toMatch(/password/i);
    expect(rdpUrl(target)).toBe('rdp://full%20address=s:127.0.0.1%3A49153&username=s:tester&pcb=s:ws1.a.1.b.c&prompt%20for%20credentials=i:1');
  });

  it('brackets an IPv6 relay address, carries a domain, and leaves out an empty username', () => {
    const file = rdpFile({ host: '::1', port: 3390, username: '', domain: 'LAB', credential: 'c' });
    expect(file.split('\r\n').slice(0, 3)).toEqual(['full address:s:[::1]:3390', 'domain:s:LAB', 'pcb:s:c']);
  });
});
