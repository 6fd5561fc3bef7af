/**
 * Server sessions (issue 14) against real servers the suite starts on this machine: the reference desktop as a
 * plain VNC server (reached directly by the gateway), Debian's openssh-server and xrdp (the test-servers image,
 * reached through bridge containers of the desktop image), and xrdp again through the relay with FreeRDP as the
 * user's own client. Each is requested like any workspace, renders in Chromium through the browser client, and a
 * wrong credential or an unreachable server fails with a clear operational_message.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import type { Browser, Page } from 'playwright-core';
import { DataSource } from 'typeorm';
import { waitForRfb } from '@ws/agent';
import { randomSecret } from '@ws/common';
import { ServerImagesService } from '@ws/images';
import { launchChromium, startBrowserSuiteApi } from './browser';
import { closeStream, openStream, registerLocalServer, streamCookie, waitForRemovedWorkspace, waitForRunningWorkspace } from './fixtures';
import { desktopImage, freePort, TestApi, TestKey, testServersImage, TIMESTAMP, waitFor } from './harness';

const CREDENTIALS_KEY = 'e2e-server-sessions-key-0123456789abcdef';
const VNC_PASSWORD = 'Vnc-pw-42';
const TESTER_PASSWORD = 'Tester-pw-42';

/** Resolves true once a TCP connection to host:port succeeds; undefined while it does not (for waitFor). */
function listening(host: string, port: number): Promise<true | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.setTimeout(2000, () => socket.destroy());
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(undefined));
    socket.once('close', () => resolve(undefined));
  });
}

/** The share of the canvas's pixels within 12 of `rgb` in each channel, or null before the first frame. */
function shareOfColour(page: Page, rgb: [number, number, number]): Promise<number | null> {
  return page.evaluate(([r0, g0, b0]) => {
    const canvas = document.querySelector<HTMLCanvasElement>('#screen canvas');
    const ctx = canvas?.getContext('2d');
    if (!canvas || !ctx || canvas.width < 2 || canvas.height < 2) return null;
    const { data } = ctx.getImageData(0, 0, canvas.width, canvas.height);
    let near = 0;
    for (let i = 0; i < data.length; i += 4) if (Math.abs(data[i] - r0) <= 12 && Math.abs(data[i + 1] - g0) <= 12 && Math.abs(data[i + 2] - b0) <= 12) near++;
    return near / (data.length / 4);
  }, rgb);
}

describe('server sessions on real servers', () => {
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });
  const containers: Docker.Container[] = [];
  let api: TestApi;
  let base: string;
  let key: TestKey;
  let admin: TestKey;
  let browser: Browser;
  let desktop: string;
  let servers: string;
  let userId: string;

  beforeAll(async () => {
    servers = testServersImage(); // before any worker runs: a build blocks this process
    // The suite's servers are on loopback (VNC) and Docker's default network (RDP, SSH): allowed by the operator's settings.
    const started = await startBrowserSuiteApi({
      SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY, SERVER_BRIDGE_IMAGE: desktopImage(), SERVER_TARGETS_ALLOW: '127.0.0.0/8', SERVER_TARGETS_ALLOW_PRIVATE: true,
    });
    ({ api, base } = started);
    desktop = started.imageName;
    await registerLocalServer(api);
    key = await api.key(['Users Auth Session', 'User']);
    admin = await api.key(['Global Admin']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'server-session-user' } })).body.user.user_id;
    browser = await launchChromium();
  }, 600_000);
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    for (const c of containers) await c.remove({ force: true }).catch(() => undefined);
    await api?.close();
  });

  /** The reference desktop as a plain VNC server with a password, published on a loopback port. */
  async function startVncServer(): Promise<number> {
    const port = await freePort();
    const container = await engine.createContainer({
      Image: desktop, name: `ws-e2e-vncsrv-${randomSecret(4).toLowerCase()}`, Env: [`VNC_PASSWORD=${VNC_PASSWORD}`], ExposedPorts: { '5900/tcp': {} },
      HostConfig: { AutoRemove: true, ShmSize: 256 * 1024 ** 2, PortBindings: { '5900/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }] } },
    });
    containers.push(container);
    await container.start();
    await waitForRfb('127.0.0.1', port, { timeoutMs: 90_000 });
    return port;
  }

  /** A test server (`rdp`: xrdp, `ssh`: sshd) on Docker's default network, user tester; answers its address there. */
  async function startTestServer(kind: 'rdp' | 'ssh'): Promise<{ ip: string; container: Docker.Container }> {
    const container = await engine.createContainer({
      Image: servers, name: `ws-e2e-${kind}srv-${randomSecret(4).toLowerCase()}`, Cmd: [kind], Env: [`TEST_PASSWORD=${TESTER_PASSWORD}`],
      HostConfig: { AutoRemove: true, NetworkMode: 'bridge' },
    });
    containers.push(container);
    await container.start();
    const ip = (await container.inspect()).NetworkSettings.Networks.bridge.IPAddress;
    await waitFor(`the ${kind} server listening at ${ip}`, () => listening(ip, kind === 'rdp' ? 3389 : 22), 60_000, 200);
    return { ip, container };
  }

  /** Runs `sh -c cmd` in a container (as its user) with `env`, to its end; answers its output. */
  async function execOut(container: Docker.Container, cmd: string, env: Record<string, string> = {}): Promise<string> {
    const exec = await container.exec({ Cmd: ['sh', '-c', cmd], Env: Object.entries(env).map(([k, v]) => `${k}=${v}`), AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    engine.modem.demuxStream(stream, out, out);
    await new Promise((resolve) => stream.on('end', resolve).on('close', resolve));
    const { ExitCode } = await exec.inspect();
    if (ExitCode !== 0) throw new Error(`${cmd} exited with ${ExitCode}: ${Buffer.concat(chunks).toString()}`);
    return Buffer.concat(chunks).toString();
  }

  async function addServerImage(definition: Parameters<ServerImagesService['upsert']>[0]): Promise<string> {
    return (await api.app.get(ServerImagesService).upsert({ xRes: 800, yRes: 600, ...definition })).image.id.replace(/-/g, '');
  }

  async function request(body: object): Promise<string> {
    const res = await api.call('request_workspace', key, { user_id: userId, ...body });
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: expect.objectContaining({ workspace_id: expect.any(String) }) });
    return res.body.workspace_id;
  }

  /** Polls until the workspace failed, and answers its operational_message. */
  async function failureOf(workspaceId: string): Promise<string> {
    return waitFor(`workspace ${workspaceId} failed`, async () => {
      const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
      if (res.body.workspace?.operational_status === 'running') throw new Error(`workspace ${workspaceId} runs, expected a failure`);
      return res.body.operational_status === 'stopped' || res.body.workspace?.operational_status === 'failed' ? (res.body.operational_message ?? res.body.workspace.operational_message) as string : undefined;
    }, 120_000, 200);
  }

  async function destroy(workspaceId: string): Promise<void> {
    await api.call('destroy_workspace', key, { workspace_id: workspaceId, user_id: userId });
    await waitForRemovedWorkspace(api, key, workspaceId, userId);
  }

  /** Opens the workspace's link in Chromium and waits until the canvas shows `rgb` over at least `share` of it. */
  async function rendersInChromium(workspaceUrl: string, rgb: [number, number, number], share: number): Promise<void> {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    try {
      const page = await context.newPage();
      await page.goto(base + workspaceUrl);
      await page.waitForFunction(() => document.body.dataset.state === 'connected', null, { timeout: 60_000, polling: 100 });
      let last: number | null = null;
      await waitFor(`the server's desktop on the canvas (${rgb.join(',')})`, async () => {
        last = await shareOfColour(page, rgb);
        return last !== null && last >= share ? true : undefined;
      }, 60_000, 200).catch((err: Error) => {
        throw new Error(`${err.message}; last share ${last}`);
      });
    } finally {
      await context.close();
    }
  }

  describe('a VNC server, reached directly', () => {
    let port: number;
    let imageId: string;

    beforeAll(async () => {
      port = await startVncServer();
      imageId = await addServerImage({ friendlyName: 'Lab VNC', protocol: 'vnc', host: '127.0.0.1', port, password: VNC_PASSWORD, allowOverride: ['password', 'port'] });
    }, 180_000);

    it('runs without a container: streams to Chromium, is shared view-only, measured, kept alive, screenshotted and destroyed', async () => {
      const workspaceId = await request({ image_id: imageId, enable_sharing: true });
      const running = await waitForRunningWorkspace(api, key, workspaceId, userId, 200);
      expect(running.workspace).toMatchObject({ operational_status: 'running', container_id: null, server_id: null, host: '127.0.0.1', hostname: '127.0.0.1', port });
      // Shared view-only, kept alive, and its stream measured, like a container's.
      const joined = await api.call('join_workspace', key, { share_id: running.workspace.share_id });
      const viewer = await openStream(base, workspaceId, { cookie: await streamCookie(api.app, joined.body.session_token, { share_id: running.workspace.share_id }) });
      try {
        const frame = await viewer.rfb.captureFrame({ timeoutMs: 15_000 });
        expect({ width: frame.width, height: frame.height }).toEqual({ width: expect.any(Number), height: expect.any(Number) });
        await waitFor('stream stats of the viewer', async () => {
          const stats = await api.call('get_workspace_frame_stats', key, { workspace_id: workspaceId, user_id: userId, client: 'all' });
          return stats.status === 200 ? stats.body : undefined;
        }, 30_000, 250);
      } finally {
        await closeStream(viewer);
      }
      expect((await api.call('keepalive', key, { workspace_id: workspaceId })).body).toEqual({ usage_reached: false });
      // The reference desktop's background (start-desktop: xsetroot #2e5d87), seen through the gateway.
      await rendersInChromium(running.workspace_url, [0x2e, 0x5d, 0x87], 0.3);
      const shot = await api.call('get_workspace_screenshot', key, { workspace_id: workspaceId, user_id: userId, width: 200 }).buffer(true).parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c)).on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect({ status: shot.status, type: shot.headers['content-type'], jpeg: (shot.body as Buffer).subarray(0, 2).toString('hex') }).toEqual({ status: 200, type: 'image/jpeg', jpeg: 'ffd8' });
      const exec = await api.call('exec_command_workspace', admin, { workspace_id: workspaceId, user_id: userId, exec_config: { cmd: 'true' } });
      expect({ status: exec.status, error: exec.body.error_message }).toEqual({ status: 409, error: expect.stringContaining('commands run only in container workspaces') });
      await destroy(workspaceId);
    });

    it('fails with a clear message for a wrong password, and for a server that is not there', async () => {
      expect(await failureOf(await request({ image_id: imageId, connection_info: { password: 'not-the-password' } })))
        .toBe(`Could not start the workspace: VNC server 127.0.0.1:${port} refused the credentials (wrong password)`);
      // Another port takes a password of the request's own (the stored one answers only the image's own server).
      const closed = await freePort();
      expect(await failureOf(await request({ image_id: imageId, connection_info: { port: closed, password: VNC_PASSWORD } })))
        .toBe(`Could not start the workspace: Could not connect to the VNC server 127.0.0.1:${closed}, or it did not answer as a VNC server`);
    });
  });

  describe('an SSH server, through a bridge', () => {
    let ip: string;
    let server: Docker.Container;
    let imageId: string;

    beforeAll(async () => {
      ({ ip, container: server } = await startTestServer('ssh'));
      imageId = await addServerImage({ friendlyName: 'Lab SSH', protocol: 'ssh', host: ip, usernameTemplate: 'tester', password: TESTER_PASSWORD, allowOverride: ['password'] });
    }, 180_000);

    it('shows the remote shell in Chromium', async () => {
      // The remote login shell paints its screen in xterm colour 91 (#8700af): what Chromium shows is the server's.
      await execOut(server, 'printf "%s\\n" "$LINE" >> /home/tester/.bashrc', { LINE: "printf '\\033[48;5;91m\\033[2J\\033[H'" });
      const workspaceId = await request({ image_id: imageId });
      const running = await waitForRunningWorkspace(api, key, workspaceId, userId, 200);
      expect(running.workspace.container_id).toEqual(expect.any(String));
      // The worker checked the target's address and keeps it: the bridge was given that address, not a name to look up.
      const [row] = await api.app.get(DataSource).query('SELECT server_connection FROM workspaces WHERE id = $1', [workspaceId]);
      expect(row.server_connection).toMatchObject({ host: ip, address: ip, mode: 'bridge' });
      await rendersInChromium(running.workspace_url, [0x87, 0x00, 0xaf], 0.3);
      await destroy(workspaceId);
    });

    it('fails with a clear message for a wrong password', async () => {
      expect(await failureOf(await request({ image_id: imageId, connection_info: { password: 'not-the-password' } }))).toMatch(/refused the username or password/);
    });
  });

  describe('an RDP server (xrdp), web-native through a bridge', () => {
    let ip: string;
    let sshIp: string;
    let imageId: string;

    beforeAll(async () => {
      ({ ip } = await startTestServer('rdp'));
      ({ ip: sshIp } = await startTestServer('ssh'));
      imageId = await addServerImage({
        friendlyName: 'Lab RDP', protocol: 'rdp', host: ip, usernameTemplate: 'tester', password: TESTER_PASSWORD, rdpClient: 'user', allowOverride: ['host', 'password'],
      });
    }, 180_000);

    it('logs on with the stored credential and shows the session in Chromium', async () => {
      const workspaceId = await request({ image_id: imageId, rdp_client_type: 'GUAC' });
      const running = await waitForRunningWorkspace(api, key, workspaceId, userId, 200);
      // The test server's session background (images/test-servers: ~/.xsession, #3a7d44).
      await rendersInChromium(running.workspace_url, [0x3a, 0x7d, 0x44], 0.2);
      const info = await api.call('get_rdp_client_connection_info', key, { workspace_id: workspaceId, user_id: userId });
      expect({ status: info.status, error: info.body.error_message }).toEqual({ status: 400, error: expect.stringContaining('is not reached with a native RDP client') });
      await destroy(workspaceId);
    });

    it('fails with a clear message for a server that is not there', async () => {
      // The SSH test server's address: nothing listens on 3389 there.
      expect(await failureOf(await request({ image_id: imageId, rdp_client_type: 'GUAC', connection_info: { host: sshIp, password: TESTER_PASSWORD } })))
        .toBe(`Could not start the workspace: Could not connect to the RDP server ${sshIp}:3389, or it did not answer as an RDP server`);
    });
  });

  describe('an RDP server (xrdp), with the user\'s own RDP client through the relay', () => {
    let server: Docker.Container;
    let imageId: string;
    let scratch: string;

    beforeAll(async () => {
      let ip: string;
      ({ ip, container: server } = await startTestServer('rdp'));
      imageId = await addServerImage({ friendlyName: 'Lab RDP native', protocol: 'rdp', host: ip, usernameTemplate: 'tester', password: TESTER_PASSWORD, rdpClient: 'rdp_client' });
      scratch = mkdtempSync(join(tmpdir(), 'ws-rdp-client-'));
    }, 180_000);
    afterAll(() => scratch && rmSync(scratch, { recursive: true, force: true }));

    /** Whether the test server runs a session of tester's: xrdp logged them on. */
    const testerSession = async () => ((await execOut(server, 'pgrep -u tester -c . || true')).trim() !== '0' ? true : undefined);

    /**
     * FreeRDP (xfreerdp under Xvfb) with `file`, the user typing the server's password as they would. In a process
     * group of its own, which `stop` ends: xvfb-run killed alone leaves its Xvfb running. Its output is not read.
     */
    function freerdp(file: string): ChildProcess {
      return spawn('xvfb-run', ['-a', 'xfreerdp', file, `/p:${TESTER_PASSWORD}`, '/cert:ignore', '/log-level:WARN'], { stdio: 'ignore', detached: true });
    }
    function stop(client: ChildProcess): void {
      try {
        process.kill(-(client.pid as number), 'SIGTERM');
      } catch {
        // the group has ended already
      }
    }

    it('answers a .rdp file and an rdp:// url that FreeRDP connects with; the relay closes with the workspace', async () => {
      const workspaceId = await request({ image_id: imageId });
      await waitForRunningWorkspace(api, key, workspaceId, userId, 200);
      const info = await api.call('get_rdp_client_connection_info', key, { workspace_id: workspaceId, user_id: userId });
      expect(info.status).toBe(200);
      const { file, url, host, port, username, expires } = info.body;
      expect({ host, username, expires }).toEqual({ host: '127.0.0.1', username: 'tester', expires: expect.stringMatching(TIMESTAMP) });
      expect(file).toContain(`full address:s:127.0.0.1:${port}\r\n`);
      expect(file).toMatch(/\r\npcb:s:ws1\.[0-9a-f]{32}\.\d+\.[0-9a-f]{16}\.[0-9a-f]{64}\r\n/);
      expect(url).toContain(`rdp://full%20address=s:127.0.0.1%3A${port}&username=s:tester&pcb=s:ws1.`);
      for (const answer of [file, url]) expect(answer).not.toContain(TESTER_PASSWORD);

      // A credential altered by one character is refused by the relay: FreeRDP gives up, and nobody is logged on.
      const forged = join(scratch, 'forged.rdp');
      writeFileSync(forged, file.replace(/(pcb:s:ws1\.[^\r]*)(.)\r\n/, (_m: string, head: string, last: string) => `${head}${last === '0' ? '1' : '0'}\r\n`));
      const refused = freerdp(forged);
      try {
        const refusedExit = await new Promise<number | null>((resolve) => refused.once('exit', resolve));
        expect(refusedExit).not.toBe(0);
      } finally {
        stop(refused);
      }
      expect(await testerSession()).toBeUndefined();

      const good = join(scratch, 'workspace.rdp');
      writeFileSync(good, file);
      const client = freerdp(good);
      try {
        await waitFor('a session of tester on the RDP server, through the relay', testerSession, 60_000, 250);
      } finally {
        stop(client);
      }
      await destroy(workspaceId);
      expect(await listening('127.0.0.1', port)).toBeUndefined();
    });
  });
});
