import Docker from 'dockerode';
import { randomSecret } from '@ws/common';
import { waitForRfb } from '@ws/agent';
import { checkVncServer } from '@ws/stream';
import { desktopImage, freePort } from './harness';

const PASSWORD = 'Vnc-pw-7';

/**
 * checkVncServer against a real VNC server on loopback: the reference desktop run by the test as a plain VNC
 * server with VNC_PASSWORD (what a server image points at, issue 14).
 */
describe('checkVncServer', () => {
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });
  let container: Docker.Container | undefined;
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    container = await engine.createContainer({
      Image: desktopImage(), name: `ws-e2e-vnc-${randomSecret(4).toLowerCase()}`, Env: [`VNC_PASSWORD=${PASSWORD}`],
      ExposedPorts: { '5900/tcp': {} },
      HostConfig: { AutoRemove: true, ShmSize: 256 * 1024 ** 2, PortBindings: { '5900/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }] } },
    });
    await container.start();
    await waitForRfb('127.0.0.1', port, { timeoutMs: 90_000 });
  }, 120_000);
  afterAll(async () => {
    await container?.remove({ force: true }).catch(() => undefined);
  });

  it('answers the desktop size with the right password', async () => {
    const check = await checkVncServer('127.0.0.1', port, PASSWORD, 20_000);
    expect(check).toMatchObject({ ok: true, width: expect.any(Number), height: expect.any(Number) });
    if (check.ok) expect(check.width * check.height).toBeGreaterThan(0);
  });

  it('says why it failed: wrong password, no password, nothing listening', async () => {
    expect(await checkVncServer('127.0.0.1', port, 'wrong-pw', 20_000))
      .toEqual({ ok: false, kind: 'auth_failed', operationalMessage: `VNC server 127.0.0.1:${port} refused the credentials (wrong password)` });
    expect(await checkVncServer('127.0.0.1', port, '', 20_000))
      .toEqual({ ok: false, kind: 'auth_required', operationalMessage: `VNC server 127.0.0.1:${port} requires a password, and none is stored or given` });
    const closed = await freePort();
    expect(await checkVncServer('127.0.0.1', closed, PASSWORD, 20_000))
      .toEqual({ ok: false, kind: 'connection_refused', operationalMessage: `VNC server 127.0.0.1:${closed} refused the connection (nothing listens there)` });
  });
});
