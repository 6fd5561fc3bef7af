import { AddressInfo, createServer, Server, Socket } from 'node:net';
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

  it('says why it failed once RFB was spoken: wrong password, no password', async () => {
    expect(await checkVncServer('127.0.0.1', port, 'wrong-pw', 20_000))
      .toEqual({ ok: false, kind: 'auth_failed', operationalMessage: `VNC server 127.0.0.1:${port} refused the credentials (wrong password)`, detail: expect.any(String) });
    expect(await checkVncServer('127.0.0.1', port, '', 20_000))
      .toEqual({ ok: false, kind: 'auth_required', operationalMessage: `VNC server 127.0.0.1:${port} requires a password, and none is stored or given`, detail: expect.any(String) });
  });

  it('says one thing for nothing listening, a silent port and another service, and quotes nothing they sent (issue 19)', async () => {
    const sockets: Socket[] = [];
    const banner = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.write('SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n');
    });
    const silent = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
    });
    const listening = (server: Server) => new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
    try {
      const ports = { closed: await freePort(), banner: await listening(banner), silent: await listening(silent) };
      for (const [name, target] of Object.entries(ports)) {
        const check = await checkVncServer('127.0.0.1', target, PASSWORD, 2000);
        expect({ name, ok: check.ok, message: check.ok ? null : check.operationalMessage })
          .toEqual({ name, ok: false, message: `Could not connect to the VNC server 127.0.0.1:${target}, or it did not answer as a VNC server` });
      }
      // The address connected to may differ from the name shown (the worker's checked address).
      const check = await checkVncServer('vnc.example.org', port, PASSWORD, 20_000, '127.0.0.1');
      expect(check).toMatchObject({ ok: true });
    } finally {
      for (const socket of sockets) socket.destroy();
      await Promise.all([banner, silent].map((server) => new Promise((resolve) => server.close(resolve))));
    }
  });
});
