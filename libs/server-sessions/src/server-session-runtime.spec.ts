import { bridgeFailureMessage, unreachableMessage } from './server-session-runtime';

const rdp = { protocol: 'rdp' as const, host: 'lab-1.example.org', port: 3389 };
const ssh = { protocol: 'ssh' as const, host: 'lab-2.example.org', port: 22 };

describe('what a server workspace says about its server', () => {
  it('one message for every way a connection fails before the protocol spoke', () => {
    expect(unreachableMessage(rdp)).toBe('Could not connect to the RDP server lab-1.example.org:3389, or it did not answer as an RDP server');
    expect(unreachableMessage({ protocol: 'vnc', host: '203.0.113.5', port: 5900 })).toBe('Could not connect to the VNC server 203.0.113.5:5900, or it did not answer as a VNC server');
    // workspace-bridge and workspace-rdp-relay tell refused, silent and other services apart, and quote ssh's last line: never passed on.
    for (const said of [
      'Could not reach the RDP server 10.0.0.7:3389 (connection refused)', 'Could not reach the RDP server 10.0.0.7:3389 (timed out after 10 seconds)',
      'The SSH server 10.0.0.7:22 closed the connection before logging on', 'The SSH connection to 10.0.0.7:22 failed (SSH-2.0-OpenSSH_9.2p1 Debian-2)',
      'The RDP connection to 10.0.0.7:3389 failed (FreeRDP exit code 147)', 'The TLS handshake with the RDP server 10.0.0.7:3389 failed',
      'The RDP server 10.0.0.7:3389 refused the username or password and SSH-2.0-x', 'Gave up after 1000 connection attempts to the rdp server 10.0.0.7:3389',
    ]) expect(bridgeFailureMessage(said, said.includes('SSH') ? ssh : rdp)).toBe(unreachableMessage(said.includes('SSH') ? ssh : rdp));
  });

  it('passes on what the logon answered, naming the server as the request did', () => {
    expect(bridgeFailureMessage('The RDP server 10.0.0.7:3389 refused the username or password', rdp)).toBe('The RDP server lab-1.example.org:3389 refused the username or password');
    expect(bridgeFailureMessage('The SSH server 10.0.0.7:22 presented a different host key than before', ssh)).toBe('The SSH server lab-2.example.org:22 presented a different host key than before');
    expect(bridgeFailureMessage('The server-session connection settings are invalid: PORT is not a TCP port number', rdp))
      .toBe('The server-session connection settings are invalid: PORT is not a TCP port number');
  });
});
