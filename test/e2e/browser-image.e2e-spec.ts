import { connect } from 'node:net';
import type { ExecResult } from '@ws/agent';
import { DataSource } from 'typeorm';
import { toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { browserImage, localDocker, TestApi, TestKey, waitFor } from './harness';

/** A page server inside the workspace, on the container's own loopback (the only network a test may use). */
const PAGE_PORT = 8123;
const PAGE_SERVER = [
  'use IO::Socket::INET; $SIG{PIPE} = "IGNORE";',
  `my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1:${PAGE_PORT}", Listen => 5, ReuseAddr => 1) or die "listen: $!";`,
  'open(my $log, ">>", "/tmp/page-requests") or die; $log->autoflush(1);',
  'while (my $c = $s->accept) { my $line = <$c>; print $log $line if defined $line; while (my $h = <$c>) { last if $h =~ /^\\r?\\n$/ }',
  '  print $c "HTTP/1.0 200 OK\\r\\nContent-Type: text/html\\r\\nConnection: close\\r\\n\\r\\n<html><body style=\\"background:#c0ffee\\">cast</body></html>"; close $c }',
].join('\n');

/**
 * The reference browser image (scripts/build-browser-image.sh) on a real Docker engine: its kiosk Chromium
 * opens WORKSPACE_URL at a fresh start, and a staged browser workspace opens the request's workspace_url when
 * it is assigned (the image's go command, workspace-browser-open), which the page server inside it observes.
 */
describe('reference browser image (kiosk chromium on WORKSPACE_URL)', () => {
  let api: TestApi;
  let admin: TestKey;
  let key: TestKey;
  let db: DataSource;
  let zoneId: string;
  let imageId: string;
  const userIds: string[] = [];

  beforeAll(async () => {
    // Before any worker runs: a build blocks this process (execFileSync) and would cost the workers their job locks.
    const imageName = browserImage();
    api = await TestApi.start({ WORKER_LOCK_MS: 3000 }, { worker: true });
    db = api.app.get(DataSource);
    const zone = await api.app.get(ZonesService).ensure('default');
    zoneId = toWireId(zone.id);
    await api.app.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 8, memory: 16 * 1024 ** 3 });
    // As npm start registers it: a browser image whose go command points the kiosk at WORKSPACE_URL, with sound.
    const image = await api.app.get(ImagesService).upsert({
      name: imageName, friendlyName: 'Browser', cores: 1, memory: 1024 ** 3, xRes: 800, yRes: 600, portMap: { vnc: '5900/tcp', audio: '4901/tcp', audio_input: '4902/tcp' },
      isBrowser: true, execConfig: { go: { cmd: 'workspace-browser-open' } },
    });
    imageId = toWireId(image.id);
    admin = await api.key(['Global Admin']);
    key = await api.key(['Users Auth Session', 'User']);
    for (let i = 0; i < 2; i++) userIds.push((await api.call('create_user', admin, { target_user: { username: `browser-${i}` } })).body.user.user_id);
  }, 1_800_000);
  afterAll(async () => api?.close());

  const run = async (containerId: string, cmd: string) => (await localDocker().exec(containerId, { cmd, wait: true, timeoutMs: 30_000 })) as ExecResult;
  /** The kiosk's URL when a chromium runs with it among its arguments, else ''. */
  const kioskUrl = async (containerId: string) => {
    const out = await run(containerId, 'url=$(head -n 1 /tmp/workspace-browser/url 2>/dev/null) && pid=$(cat /tmp/workspace-browser/chromium.pid 2>/dev/null) && tr "\\0" "\\n" < /proc/$pid/cmdline | grep -Fx -- "$url" || true');
    return out.stdout.trim();
  };
  const dashed = (workspaceId: string) => workspaceId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
  const containerOf = async (workspaceId: string) =>
    (await db.query('SELECT container_id FROM workspaces WHERE id = $1', [dashed(workspaceId)]))[0].container_id as string;
  /** The first bytes the sound port sends after the workspace's credential (bounded: 15 s or 7 bytes). */
  const soundAnswer = (port: number, credential: string) =>
    new Promise<string>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      let received = Buffer.alloc(0);
      const done = () => {
        clearTimeout(timer);
        socket.destroy();
        resolve(received.subarray(0, 7).toString('latin1'));
      };
      const timer = setTimeout(done, 15_000);
      socket.on('error', done).on('close', done).on('connect', () => socket.write(`${credential}\n`));
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        if (received.length >= 7) done();
      });
    });
  const running = (workspaceId: string, userId: string) =>
    waitFor(`workspace ${workspaceId} running`, async () => {
      const res = await api.call('get_workspace_status', key, { workspace_id: workspaceId, user_id: userId });
      if (res.body.workspace?.operational_status === 'running') return res.body.workspace;
      if (res.body.workspace?.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(res.body)}`);
      return undefined;
    }, 300_000, 250);

  it('opens WORKSPACE_URL in the kiosk at a fresh start; the image holds no setuid or setgid file', async () => {
    const url = `http://127.0.0.1:${PAGE_PORT}/fresh?from=request`;
    const res = await api.call('request_workspace', key, { user_id: userIds[0], image_id: imageId, workspace_url: url });
    expect(res.status).toBe(200);
    const workspace = await running(res.body.workspace_id, userIds[0]);
    const containerId = await containerOf(res.body.workspace_id);
    // Sound, as the desktop has it: the ports are in port_map and the sound port streams Ogg after the credential.
    expect(Object.keys(workspace.port_map).sort()).toEqual(['audio', 'audio_input', 'uploads', 'vnc']);
    const [{ host_ports: hostPorts }] = await db.query('SELECT host_ports FROM workspaces WHERE id = $1', [dashed(res.body.workspace_id)]);
    expect(await waitFor('the sound port', async () => ((await soundAnswer(hostPorts.audio, workspace.token)) === 'OK\nOggS' ? true : undefined), 60_000, 500)).toBe(true);
    expect(await waitFor('the kiosk on WORKSPACE_URL', async () => ((await kioskUrl(containerId)) === url ? true : undefined), 120_000, 250)).toBe(true);
    // Chromium runs as the image's unprivileged user, without a setuid sandbox helper.
    expect((await run(containerId, 'ps -o user= -p "$(cat /tmp/workspace-browser/chromium.pid)"')).stdout.trim()).toBe('workspace');
    expect((await run(containerId, 'find / -xdev -perm /6000 \\( -type f -o -type d \\) -print 2>/dev/null | head -n 5')).stdout).toBe('');

    expect((await api.call('destroy_workspace', key, { workspace_id: res.body.workspace_id, user_id: userIds[0] })).status).toBe(200);
  }, 600_000);

  it('a staged browser workspace opens the request workspace_url when it is assigned', async () => {
    const created = await api.call('create_staging_config', admin, { target_staging_config: { zone_id: zoneId, image_id: imageId, num_sessions: 1, expiration: 1 } });
    expect(created.status).toBe(200);
    const configId = created.body.staging_config.staging_config_id as string;
    const staged = await waitFor('a staged browser workspace', async () => {
      const rows: Array<{ id: string; status: string }> = await db.query(
        `SELECT id, status FROM workspaces WHERE staging_config_id = $1 AND user_id IS NULL AND status <> 'deleted'`, [configId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5')]);
      if (rows.some((r) => r.status === 'failed')) throw new Error(`the staged workspace failed: ${JSON.stringify(rows)}`);
      return rows.find((r) => r.status === 'running')?.id;
    }, 300_000, 250);
    const containerId = await containerOf(staged);
    // Staged with nobody's URL: the kiosk shows a blank page.
    expect(await waitFor('the kiosk on a blank page', async () => ((await kioskUrl(containerId)) === 'about:blank' ? true : undefined), 120_000, 250)).toBe(true);
    await localDocker().exec(containerId, { cmd: `exec perl -e '${PAGE_SERVER.replace(/'/g, "'\\''")}' >/tmp/page-server.log 2>&1`, wait: false });
    await waitFor('the page server listening', async () => ((await run(containerId, `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${PAGE_PORT}' 2>/dev/null && echo up || true`)).stdout.includes('up') ? true : undefined), 30_000, 250);
    // The probe above was one request without a request line; only what the kiosk asks for counts from here.
    await run(containerId, ': > /tmp/page-requests');

    const url = `http://127.0.0.1:${PAGE_PORT}/cast-page?from=staging`;
    const res = await api.call('request_workspace', key, { user_id: userIds[1], image_id: imageId, workspace_url: url });
    expect(res.body).toMatchObject({ status: 'running', workspace_id: toWireId(staged) });
    const requested = await waitFor('the kiosk asked for the page', async () => {
      const out = await run(containerId, 'cat /tmp/page-requests 2>/dev/null || true');
      return out.stdout.includes('GET /cast-page?from=staging ') ? out.stdout : undefined;
    }, 120_000, 250);
    expect(requested).toMatch(/^GET \/cast-page\?from=staging HTTP\/1\.1\r?$/m);
    expect(await kioskUrl(containerId)).toBe(url);

    expect((await api.call('delete_staging_config', admin, { target_staging_config: { staging_config_id: configId } })).status).toBe(200);
    expect((await api.call('destroy_workspace', key, { workspace_id: res.body.workspace_id, user_id: userIds[1] })).status).toBe(200);
  }, 900_000);
});
