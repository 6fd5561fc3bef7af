/**
 * Two real Docker engines (issue 24, points 1, 4 and 5): this machine's engine and a second dockerd the suite starts
 * (test/e2e/second-engine.ts: its own data root and bridge, loopback TCP with mutual TLS), registered with
 * `server add … --tls-ca --tls-cert --tls-key`. The second starts with no image: a launch that needs one it lacks
 * fails with a 503 naming the image until `image distribute` copies it there (docker save → docker load through the
 * API). Then a workspace on each engine (pinned by its image's zone) runs and is reached through its host's
 * publish address: screenshot, exec, downloads and a VNC stream through the gateway, and it is isolated by the
 * firewall for its engine's bridge; destroying leaves no container on either. Stopping the second engine mid-run
 * sends launches to the first; started again it is reconciled (point 8).
 * Real api, worker, PostgreSQL, Redis and both engines.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { AddressInfo, createServer, Server as NetServer } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as jpeg from 'jpeg-js';
import type { Response } from 'superagent';
import { DataSource } from 'typeorm';
import { parseId } from '@ws/common';
import { LABELS, WORKSPACE_NETWORK } from '@ws/agent';
import { runCli as cli, useApiForCli } from './cli-runner';
import { closeStream, openStream, waitForRemovedWorkspace, waitForRunningWorkspace } from './fixtures';
import { desktopImage, localDocker, TestApi, TestKey, waitFor } from './harness';
import { SecondEngine } from './second-engine';

jest.setTimeout(600_000);

/** A supertest parser that keeps the body's bytes. */
const bytesOf = (res: Response, done: (err: Error | null, body: unknown) => void) => {
  const chunks: Buffer[] = [];
  (res as unknown as NodeJS.ReadableStream).on('data', (c: Buffer) => chunks.push(c));
  (res as unknown as NodeJS.ReadableStream).on('end', () => done(null, Buffer.concat(chunks)));
};

describe('two Docker engines: images copied through the service, workspaces on each reached through the gateway (issue 24)', () => {
  let engine: SecondEngine;
  let api: TestApi;
  let base: string;
  let admin: TestKey;
  let key: TestKey;
  let userId: string;
  const imageIds: Record<'local' | 'second' | 'anywhere', string> = { local: '', second: '', anywhere: '' };
  let restoreEnv: () => Promise<void> = async () => undefined;
  const cleanups: Array<() => Promise<void>> = [];
  let listener: NetServer;
  let listenerPort: number;

  beforeAll(async () => {
    engine = await SecondEngine.start();
    // A service of the host on every address: no workspace may reach it.
    listener = createServer((socket) => socket.on('error', () => undefined).end());
    await new Promise<void>((resolve, reject) => listener.once('error', reject).listen(0, '0.0.0.0', () => resolve()));
    listenerPort = (listener.address() as AddressInfo).port;
    cleanups.push(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    api = await TestApi.start({ SERVER_HEALTH_INTERVAL_MS: 1000, SERVER_HEALTH_TIMEOUT_MS: 2000 }, { worker: true });
    base = await api.listen();
    restoreEnv = useApiForCli(api);
    await cli('zone', 'add', 'second');
    await cli('server', 'add', 'local', '--endpoint', 'unix:///var/run/docker.sock', '--cores', '4', '--memory', '8G');
    const second = JSON.parse(await cli(
      'server', 'add', 'second', '--endpoint', engine.endpoint, '--zone', 'second', '--publish-host', '127.0.0.1',
      '--tls-ca', engine.tls.ca, '--tls-cert', engine.tls.cert, '--tls-key', engine.tls.key, '--json',
    ));
    // Capacity read from the engine through mutual TLS.
    expect(second).toEqual(expect.objectContaining({ hostname: 'second', endpoint: engine.endpoint, zone: 'second', cores: expect.any(Number), health: 'up' }));
    expect(second.cores).toBeGreaterThan(0);
    for (const [name, zone] of [['local', 'default'], ['second', 'second'], ['anywhere', null]] as const) {
      const added = JSON.parse(await cli('image', 'add', desktopImage(), '--friendly-name', `Desktop on ${name}`, ...(zone ? ['--zone', zone] : []), '--cores', '0.5', '--memory', '512M', '--x-res', '800', '--y-res', '600', '--json'));
      imageIds[name] = added.image_id;
    }
    admin = await api.key(['Global Admin']);
    key = await api.key(['Users Auth Session', 'User']);
    userId = (await api.call('create_user', admin, { target_user: { username: 'two-engines' } })).body.user.user_id;
  });
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup().catch(() => undefined);
    await restoreEnv();
    await api?.close();
    await engine?.stop();
  });

  const ourContainers = async (host: ReturnType<typeof localDocker>) => host.listByLabels({ [LABELS.deploymentId]: api.config.DEPLOYMENT_ID });

  it('the second engine shares no image with the first; a launch that needs one it lacks is refused with a 503 naming it', async () => {
    expect(await engine.host().imageExists(desktopImage())).toBe(false);
    // The second engine's inventory vouches for the image's absence once it is taken after the image was saved.
    const db = api.app.get(DataSource);
    await waitFor('an inventory of second newer than the image', async () => ((await db.query(
      'SELECT s.images_checked_at >= i.updated_at AS newer FROM servers s, images i WHERE s.hostname = $1 AND i.id = $2', ['second', parseId(imageIds.second)],
    ))[0]?.newer === true ? true : undefined), 30_000, 200);
    const refused = await api.call('request_workspace', key, { user_id: userId, image_id: imageIds.second });
    expect(refused.status).toBe(503);
    expect(refused.body.error_message).toContain(`image Desktop on second, ${desktopImage()}, is on no reachable server`);
  });

  it('image distribute copies it through the Docker API, with progress on stderr, and placement knows at once', async () => {
    const progress: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => (progress.push(String(chunk)), true));
    let answer: string;
    try {
      answer = await cli('image', 'distribute', desktopImage(), '--server', 'second', '--json');
    } finally {
      spy.mockRestore();
    }
    expect(JSON.parse(answer)).toEqual({ image: desktopImage(), source: 'local', copied: ['second'], present: [] });
    expect(progress.at(-1)).toMatch(new RegExp(`^copied ${desktopImage()} local → second: \\d+\\.\\d MiB\\n$`));
    expect(await engine.host().imageExists(desktopImage())).toBe(true);
    // Again: nothing to copy.
    expect(JSON.parse(await cli('image', 'distribute', desktopImage(), '--server', 'second', '--json'))).toEqual(expect.objectContaining({ copied: [], present: ['second'] }));
  });

  it('image add --distribute and server add --copy-images copy on request', async () => {
    // A tiny image of one file, made on the first engine only (docker import).
    const tiny = `ws-e2e-tiny:${api.config.DEPLOYMENT_ID}`;
    const dir = mkdtempSync('/tmp/ws-e2e-tiny-');
    writeFileSync(join(dir, 'hello.txt'), 'hello');
    const tar = execFileSync('tar', ['-c', '-C', dir, 'hello.txt']);
    rmSync(dir, { recursive: true, force: true });
    const [repo, tag] = tiny.split(':');
    const imported = (await localDocker().docker.importImage(Readable.from([tar]) as unknown as string, { repo, tag })) as NodeJS.ReadableStream;
    await new Promise((resolve, reject) => imported.on('end', resolve).on('error', reject).resume());
    cleanups.push(() => localDocker().docker.getImage(tiny).remove().then(() => undefined));
    expect(await engine.host().imageExists(tiny)).toBe(false);

    const quietly = async (...args: string[]) => {
      const spy = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
      try {
        return await cli(...args);
      } finally {
        spy.mockRestore();
      }
    };
    await quietly('image', 'add', tiny, '--friendly-name', 'Tiny', '--distribute');
    expect(await engine.host().imageExists(tiny)).toBe(true);

    await engine.host().docker.getImage(tiny).remove();
    await quietly('server', 'add', 'second', '--endpoint', engine.endpoint, '--zone', 'second', '--tls-ca', engine.tls.ca, '--tls-cert', engine.tls.cert, '--tls-key', engine.tls.key, '--copy-images');
    expect(await engine.host().imageExists(tiny)).toBe(true);
    // It is not a desktop: out of the catalog again.
    await cli('image', 'remove', 'Tiny');
  });

  it('a workspace on each engine runs, answers a screenshot and exec, and streams through the gateway; destroy leaves no container', async () => {
    const launched: Record<string, { workspace_id: string; hostname: string; container_id: string; jwt: string }> = {};
    for (const name of ['local', 'second'] as const) {
      const res = await api.call('request_workspace', key, { user_id: userId, image_id: imageIds[name] });
      expect(res.status).toBe(200);
      const running = await waitForRunningWorkspace(api, key, res.body.workspace_id, userId);
      launched[name] = { ...running.workspace, jwt: running.workspace_url.split('/').pop() };
      expect(launched[name].hostname).toBe(name);
    }
    expect((await ourContainers(localDocker())).map((c) => c.id)).toEqual([launched.local.container_id]);
    expect((await ourContainers(engine.host())).map((c) => c.id)).toEqual([launched.second.container_id]);

    for (const name of ['local', 'second'] as const) {
      const { workspace_id } = launched[name];
      const shot = await api.call('get_workspace_screenshot', key, { workspace_id, user_id: userId, width: 400 }).buffer(true).parse(bytesOf);
      expect(shot.status).toBe(200);
      expect(jpeg.decode(shot.body as Buffer).width).toBe(400);

      const exec = await api.call('exec_command_workspace', admin, { workspace_id, user_id: userId, exec_config: { cmd: 'hostname; echo engine-ok' }, wait: true });
      expect(exec.status).toBe(200);
      expect(JSON.stringify(exec.body)).toContain('engine-ok');

      // Isolated as on the first engine (the firewall for this engine's bridge): the workspace reaches its own VNC
      // server over its address (the probe works) but not a service of the host at its bridge's gateway.
      const host = name === 'local' ? localDocker() : engine.host();
      const own = await host.inspect(launched[name].container_id);
      const network = (await host.docker.getNetwork(WORKSPACE_NETWORK.name).inspect()) as { IPAM: { Config: Array<{ Gateway?: string }> }; Options: Record<string, string> };
      expect(network.Options['com.docker.network.bridge.name']).toBe(name === 'local' ? WORKSPACE_NETWORK.bridge : engine.isolatedBridge);
      const probe = async (address: string, port: number) => (await api.call('exec_command_workspace', admin, {
        workspace_id, user_id: userId, wait: true, exec_config: { cmd: `timeout 5 bash -c 'exec 3<>/dev/tcp/${address}/${port} && echo open' 2>&1; echo "exit=$?"` },
      })).body;
      expect(JSON.stringify(await probe(own.ip as string, 5900))).toContain('open');
      expect(JSON.stringify(await probe(network.IPAM.Config[0].Gateway as string, listenerPort))).not.toContain('open');

      // In-session files: a file the user saves in ~/Downloads is listed and downloaded through the api.
      await api.call('exec_command_workspace', admin, { workspace_id, user_id: userId, exec_config: { cmd: `mkdir -p "$HOME/Downloads" && printf 'made on ${name}' > "$HOME/Downloads/on-${name}.txt"` }, wait: true });
      const cookie = `ws_stream=${launched[name].jwt}`;
      const listed = await api.raw().get(`/api/stream/${workspace_id}/downloads`).set('cookie', cookie).set('origin', base);
      expect(listed.status).toBe(200);
      expect(listed.body.files.map((f: { name: string }) => f.name)).toEqual([`on-${name}.txt`]);
      const file = await api.raw().get(`/api/stream/${workspace_id}/downloads/on-${name}.txt`).set('cookie', cookie).set('origin', base).buffer(true).parse(bytesOf);
      expect(file.status).toBe(200);
      expect((file.body as Buffer).toString()).toBe(`made on ${name}`);

      const stream = await openStream(base, workspace_id, launched[name].jwt);
      try {
        await stream.rfb.captureFrame({ timeoutMs: 15_000 });
        expect([stream.rfb.width, stream.rfb.height]).toEqual([800, 600]);
      } finally {
        await closeStream(stream);
      }
    }

    for (const name of ['local', 'second'] as const) {
      expect((await api.call('destroy_workspace', key, { workspace_id: launched[name].workspace_id, user_id: userId })).status).toBe(200);
    }
    for (const name of ['local', 'second'] as const) await waitForRemovedWorkspace(api, key, launched[name].workspace_id, userId);
    await waitFor('no container left on either engine', async () =>
      ((await ourContainers(localDocker())).length === 0 && (await ourContainers(engine.host())).length === 0 ? true : undefined), 60_000);
  });

  it('stopping the second engine sends new launches to the first, reports its workspaces, and starting it again reconciles (point 8)', async () => {
    const serverNamed = async (hostname: string) => (JSON.parse(await cli('server', 'list', '--json')) as Array<{ hostname: string; health: string }>).find((s) => s.hostname === hostname);
    const res = await api.call('request_workspace', key, { user_id: userId, image_id: imageIds.second });
    const affected = (await waitForRunningWorkspace(api, key, res.body.workspace_id, userId)).workspace;
    expect(affected.hostname).toBe('second');

    await engine.halt();
    await waitFor('second marked down', async () => ((await serverNamed('second'))?.health === 'down' ? true : undefined), 60_000, 200);
    const status = await api.call('get_workspace_status', key, { workspace_id: affected.workspace_id, user_id: userId });
    expect(status.body.operational_message).toMatch(/^The workspace's host second is unreachable since /);
    expect(status.body.server).toEqual(expect.objectContaining({ hostname: 'second', health: 'down' }));
    // New launches go to the engine that answers; one only the stopped engine may run is refused.
    const elsewhere = await api.call('request_workspace', key, { user_id: userId, image_id: imageIds.anywhere });
    expect(elsewhere.status).toBe(200);
    expect((await waitForRunningWorkspace(api, key, elsewhere.body.workspace_id, userId)).workspace.hostname).toBe('local');
    const refused = await api.call('request_workspace', key, { user_id: userId, image_id: imageIds.second });
    expect(refused.status).toBe(503);
    expect(refused.body.error_message).toMatch(/every server that can run image Desktop on second is unreachable/);

    // Started again on the same data root: marked up, its workspace no longer reported unreachable, the images still there.
    await engine.resume();
    await waitFor('second marked up', async () => ((await serverNamed('second'))?.health === 'up' ? true : undefined), 60_000, 200);
    expect(await engine.host().imageExists(desktopImage())).toBe(true);
    // Docker stopped its containers when it stopped (no live-restore): the read reports that, not the host.
    const back = await api.call('get_workspace_status', key, { workspace_id: affected.workspace_id, user_id: userId });
    expect(JSON.stringify(back.body)).not.toMatch(/unreachable/);
    expect(JSON.stringify(back.body)).toMatch(/The workspace container stopped \(exited/);

    // Nothing lost or duplicated: each workspace has one container on its own engine, and destroying both leaves none.
    expect((await ourContainers(engine.host())).map((c) => c.id)).toEqual([affected.container_id]);
    expect(await ourContainers(localDocker())).toHaveLength(1);
    for (const id of [affected.workspace_id, elsewhere.body.workspace_id]) {
      expect((await api.call('destroy_workspace', key, { workspace_id: id, user_id: userId })).status).toBe(200);
    }
    for (const id of [affected.workspace_id, elsewhere.body.workspace_id]) await waitForRemovedWorkspace(api, key, id, userId);
    await waitFor('no container left on either engine', async () =>
      ((await ourContainers(localDocker())).length === 0 && (await ourContainers(engine.host())).length === 0 ? true : undefined), 60_000);
  });
});

