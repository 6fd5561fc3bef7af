/**
 * Server sessions (issue 14) against real servers the suite starts on this machine: the reference desktop as a
 * plain VNC server (reached directly by the gateway). Each is requested like any workspace, renders in Chromium
 * through the browser client, and a wrong credential or an unreachable server fails with a clear operational_message.
 */
import Docker from 'dockerode';
import type { Browser, Page } from 'playwright-core';
import { waitForRfb } from '@ws/agent/rfb';
import { randomSecret } from '@ws/common';
import { ServerImagesService } from '@ws/images';
import { launchChromium, startBrowserSuiteApi } from './browser';
import { registerLocalServer, waitForRunningWorkspace } from './fixtures';
import { freePort, TestApi, TestKey, waitFor } from './harness';

const CREDENTIALS_KEY = 'e2e-server-sessions-key-0123456789abcdef';
const VNC_PASSWORD = 'Vnc-pw-42';

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
  let userId: string;

  beforeAll(async () => {
    const started = await startBrowserSuiteApi({ SERVER_CREDENTIALS_KEY: CREDENTIALS_KEY });
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
    await waitFor(`workspace ${workspaceId} removed`, async () => ((await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId })).status === 400 ? true : undefined), 60_000, 200);
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

    it('runs without a container, streams to Chromium, takes screenshots, and is destroyed', async () => {
      const workspaceId = await request({ image_id: imageId });
      const running = await waitForRunningWorkspace(api, key, workspaceId, userId, 200);
      expect(running.workspace).toMatchObject({ operational_status: 'running', container_id: null, server_id: null, host: null });
      // The reference desktop's background (start-desktop: xsetroot #2e5d87), seen through the gateway.
      await rendersInChromium(running.workspace_url, [0x2e, 0x5d, 0x87], 0.3);
      const shot = await api.call('get_workspace_screenshot', key, { workspace_id: workspaceId, user_id: userId, width: 200 }).buffer(true).parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c)).on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect({ status: shot.status, type: shot.headers['content-type'], jpeg: (shot.body as Buffer).subarray(0, 2).toString('hex') }).toEqual({ status: 200, type: 'image/jpeg', jpeg: 'ffd8' });
      const exec = await api.call('exec_command_workspace', admin, { workspace_id: workspaceId, exec_config: { cmd: 'true' } });
      expect({ status: exec.status, error: exec.body.error_message }).toEqual({ status: 409, error: expect.stringContaining('commands run only in container workspaces') });
      await destroy(workspaceId);
    });

    it('fails with a clear message for a wrong password, and for a server that is not there', async () => {
      expect(await failureOf(await request({ image_id: imageId, connection_info: { password: 'not-the-password' } })))
        .toBe(`Could not start the workspace: VNC server 127.0.0.1:${port} refused the credentials (wrong password)`);
      const closed = await freePort();
      expect(await failureOf(await request({ image_id: imageId, connection_info: { port: closed } })))
        .toBe(`Could not start the workspace: VNC server 127.0.0.1:${closed} refused the connection (nothing listens there)`);
    });
  });
});
