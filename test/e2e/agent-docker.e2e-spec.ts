import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { randomSecret } from '@ws/common';
import {
  buildContainerSpec,
  ContainerNotFoundError,
  ContainerNotRunningError,
  DockerHost,
  ensureWorkspaceNetwork,
  ExecTimeoutError,
  ExecUserNotAllowedError,
  ImageNotFoundError,
  isTransientDockerError,
  LABELS,
  WorkspaceContainerSpec,
} from '@ws/agent';
import { desktopImage } from './harness';

/**
 * The agent against the local Docker engine and the reference desktop image (built locally, never pulled).
 * Every container carries a deployment id of its own and is removed in afterAll. Only 127.0.0.1 is contacted.
 */
const REPO = join(__dirname, '..', '..');
const deploymentId = `e2e-agent-${randomSecret(6)}`;
const host = DockerHost.fromEndpoint({ endpoint: 'unix:///var/run/docker.sock', name: 'local-e2e' });
let image = '';

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 25;
  while (Date.now() < deadline) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 250);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

function specFor(workspaceId: string, overrides: Partial<WorkspaceContainerSpec> = {}): WorkspaceContainerSpec {
  return {
    ...buildContainerSpec({
      workspace: { id: workspaceId, cores: 1, memory: 1024 * 1024 * 1024, token: 'vnc-secret' },
      image: { name: image, xRes: 1280, yRes: 720, attributes: [{ category: 'port_map', name: 'vnc', value: '5900/tcp' }] },
      server: { publishHost: '127.0.0.1' },
      deploymentId,
      environment: { GREETING: 'hello' },
      clientLanguage: 'de-DE',
      clientTimezone: 'Europe/Berlin',
    }),
    ...overrides,
  };
}

describe('agent on a real Docker engine', () => {
  const workspaceId = `e2e-${randomSecret(8)}`;
  let containerId = '';

  beforeAll(async () => {
    execFileSync('bash', [join(REPO, 'scripts/ensure-docker.sh')], { cwd: REPO, stdio: ['ignore', 'ignore', 'inherit'], timeout: 20 * 60_000 });
    image = desktopImage();
    expect(image).toMatch(/^workspace-server\/desktop:[0-9a-f]{12}$/);
    await ensureWorkspaceNetwork(host); // the specs join it, as the worker's do
  }, 31 * 60_000);

  afterAll(async () => {
    for (const c of await host.listByLabels({ [LABELS.deploymentId]: deploymentId })) await host.remove(c.id);
    expect(await host.listByLabels({ [LABELS.deploymentId]: deploymentId })).toEqual([]);
  });

  it('talks to the engine', async () => {
    await expect(host.ping()).resolves.toBe(true);
    const info = await host.info();
    expect(info.ncpu).toBeGreaterThan(0);
    expect(info.memTotal).toBeGreaterThan(0);
    await expect(host.imageExists(image)).resolves.toBe(true);
    await expect(host.imageExists('workspace-server/desktop:does-not-exist')).resolves.toBe(false);
  });

  it('reports a missing image as a permanent error without pulling', async () => {
    const ref = `workspace-server/desktop:missing-${randomSecret(4)}`;
    const err = await host.createWorkspaceContainer(specFor(`e2e-${randomSecret(8)}`, { image: ref })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect((err as Error).message).toBe(`Image ${ref} is not present on server local-e2e`);
    expect(isTransientDockerError(err)).toBe(false);
  });

  it('creates idempotently by name', async () => {
    const spec = specFor(workspaceId);
    const first = await host.createWorkspaceContainer(spec);
    expect(first.created).toBe(true);
    containerId = first.containerId;
    const again = await host.createWorkspaceContainer(spec);
    expect(again).toEqual({ containerId, created: false });

    // concurrent creates of another name also end up with a single container
    const other = specFor(`e2e-${randomSecret(8)}`);
    const both = await Promise.all([host.createWorkspaceContainer(other), host.createWorkspaceContainer(other)]);
    expect(both[0].containerId).toBe(both[1].containerId);
    expect(both.filter((c) => c.created)).toHaveLength(1);
    expect(await host.listByLabels({ [LABELS.workspaceId]: other.labels[LABELS.workspaceId] })).toHaveLength(1);

    // not started: exec is refused as a permanent state error
    const err = await host.exec(both[0].containerId, { cmd: 'true' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContainerNotRunningError);
  });

  it('applies the security and resource settings', async () => {
    const raw = await host.docker.getContainer(containerId).inspect();
    expect(raw.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      PidsLimit: 2048,
      NanoCpus: 1e9,
      Memory: 1024 * 1024 * 1024,
      MemorySwap: 1024 * 1024 * 1024,
      PortBindings: { '5900/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] },
    });
    expect(raw.Config.Env).toEqual(expect.arrayContaining(['GREETING=hello', 'LANG=de_DE.UTF-8', 'TZ=Europe/Berlin', 'X_RES=1280', 'Y_RES=720', 'VNC_PORT=5900']));
  });

  it('starts (idempotently) and serves RFB on the published 127.0.0.1 port', async () => {
    const t0 = performance.now();
    await host.start(containerId);
    const state = await host.inspect(containerId);
    expect(state.hostPorts.vnc).toBeGreaterThan(0);
    const rfbMs = await host.waitForRfb('127.0.0.1', state.hostPorts.vnc, { timeoutMs: 60_000 });
    const totalMs = Math.round(performance.now() - t0);
    console.warn(`[agent-docker] start → RFB banner: ${totalMs} ms (waitForRfb ${rfbMs} ms)`);
    await host.start(containerId); // 304 is success

    const again = await host.inspect(containerId);
    expect(again).toMatchObject({ id: containerId, running: true, status: 'running', exitCode: 0, hostPorts: { vnc: state.hostPorts.vnc } });
    expect(again.name).toBe(`ws-${workspaceId}`);
    expect(again.startedAt).toBeInstanceOf(Date);
    expect(again.labels[LABELS.workspaceId]).toBe(workspaceId);
    // an explicit port map names the same binding
    expect((await host.inspect(containerId, { display: '5900/tcp' })).hostPorts).toEqual({ display: state.hostPorts.vnc });
  });

  it('execs as the sandboxed user by default and as root on request', async () => {
    const user = await host.exec(containerId, { cmd: 'id -u; grep CapEff /proc/self/status' });
    expect(user.exitCode).toBe(0);
    expect(user.stdout).toMatch(/^1000\nCapEff:\s+0000000000000000\n$/);
    const root = await host.exec(containerId, { cmd: 'id -u', user: 'root' });
    expect(root).toMatchObject({ exitCode: 0, stdout: '0\n', stderr: '', truncated: false });
    // no-new-privileges (default): root is uid 0 without effective capabilities; it still owns root's files
    const rootFiles = await host.exec(containerId, { cmd: 'echo ok > /etc/agent-e2e && cat /etc/agent-e2e && grep CapEff /proc/self/status', user: 'root' });
    expect(rootFiles).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/^ok\nCapEff:\s+0000000000000000\n$/) });
    const sandboxed = await host.exec(containerId, { cmd: 'echo no > /etc/agent-e2e' });
    expect(sandboxed.exitCode).not.toBe(0);
  });

  it('without no-new-privileges root execs keep the CapAdd set and the desktop still comes up', async () => {
    const spec = specFor(`e2e-${randomSecret(8)}`, { noNewPrivileges: false });
    const { containerId: id } = await host.createWorkspaceContainer(spec);
    await host.start(id);
    const { hostPorts } = await host.inspect(id);
    await host.waitForRfb('127.0.0.1', hostPorts.vnc, { timeoutMs: 60_000 });
    const chown = await host.exec(id, { cmd: 'touch /tmp/owned && chown 1000:1000 /tmp/owned && stat -c %u /tmp/owned', user: 'root' });
    expect(chown).toMatchObject({ exitCode: 0, stdout: '1000\n' });
    const user = await host.exec(id, { cmd: 'grep CapEff /proc/self/status' });
    expect(user.stdout).toMatch(/^CapEff:\s+0000000000000000\n$/);
    await host.remove(id);
  });

  it('rejects any other user before calling Docker', async () => {
    const spy = jest.spyOn(host.docker, 'getContainer');
    try {
      const err = await host.exec(containerId, { cmd: 'id -u', user: 'bob' as 'root' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ExecUserNotAllowedError);
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  it('keeps state between execs and honours env and workdir', async () => {
    const write = await host.exec(containerId, { cmd: 'printf %s "persisted $GREETING" > /tmp/note.txt' });
    expect(write.exitCode).toBe(0);
    const read = await host.exec(containerId, { cmd: 'cat /tmp/note.txt' });
    expect(read.stdout).toBe('persisted hello');

    const env = await host.exec(containerId, { cmd: 'printf "%s|%s|%s" "$FOO" "$(pwd)" "$X_RES"', environment: { FOO: 'bar baz "q"' }, workdir: '/tmp' });
    expect(env).toMatchObject({ exitCode: 0, stdout: 'bar baz "q"|/tmp|1280' });
    const home = await host.exec(containerId, { cmd: 'pwd' });
    expect(home.stdout).toBe('/home/workspace\n');
  });

  it('separates and truncates output and reports the exit code', async () => {
    const r = await host.exec(containerId, { cmd: "head -c 100000 /dev/zero | tr '\\0' a; echo done >&2; exit 3", maxOutputBytes: 1000 });
    expect(r.exitCode).toBe(3);
    expect(r.stdout).toBe('a'.repeat(1000));
    expect(r).toMatchObject({ truncated: true, stdoutTruncated: true, stdoutBytes: 100000, stderr: 'done\n', stderrTruncated: false });
  });

  it('bounds a command by timeoutMs', async () => {
    const err = await host.exec(containerId, { cmd: 'echo started; sleep 20', timeoutMs: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecTimeoutError);
    expect((err as ExecTimeoutError).message).toMatch(/did not finish within 500 ms/);
    expect((err as ExecTimeoutError).partial.stdout).toBe('started\n');
  });

  it('runs detached commands', async () => {
    const started = await host.exec(containerId, { cmd: 'sleep 0.2; touch /tmp/detached-done', wait: false });
    expect(started.execId).toMatch(/^[0-9a-f]{64}$/);
    await waitFor('the detached command', async () => ((await host.exec(containerId, { cmd: 'test -f /tmp/detached-done' })).exitCode === 0 ? true : undefined));
  });

  it('streams stdin and stdout of a process running as the sandboxed user; ends when it exits without reading all its stdin', async () => {
    const data = randomBytes(3 * 1024 * 1024);
    const echo = await host.execStream(containerId, { cmd: 'id -u >&2; cat', stdin: true });
    const chunks: Buffer[] = [];
    echo.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    echo.stdin.end(data);
    expect(await echo.wait(30_000)).toEqual({ exitCode: 0, stderr: '1000\n' });
    expect(Buffer.concat(chunks).equals(data)).toBe(true);

    // It stops reading and exits while more is queued for it: Docker half-closes, the wait does not hang.
    const early = await host.execStream(containerId, { cmd: 'head -c 10 > /dev/null; exit 5', stdin: true });
    early.stdout.resume();
    early.stdin.write(randomBytes(8 * 1024 * 1024));
    expect((await early.wait(30_000)).exitCode).toBe(5);
  });

  it('lists by labels', async () => {
    const list = await host.listByLabels({ [LABELS.deploymentId]: deploymentId, [LABELS.workspaceId]: workspaceId });
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ id: containerId, name: `ws-${workspaceId}`, state: 'running', image });
    expect(list[0].labels[LABELS.deploymentId]).toBe(deploymentId);
    expect((await host.listByLabels({ [LABELS.deploymentId]: deploymentId })).length).toBeGreaterThanOrEqual(2);
  });

  it('removes idempotently', async () => {
    await host.remove(containerId);
    await expect(host.inspect(containerId)).rejects.toBeInstanceOf(ContainerNotFoundError);
    await host.remove(containerId);
    expect(await host.listByLabels({ [LABELS.workspaceId]: workspaceId })).toEqual([]);
  });
});
