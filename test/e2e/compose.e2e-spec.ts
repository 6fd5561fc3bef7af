import { execFile, execFileSync } from 'child_process';
import { randomBytes } from 'crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { LABELS } from '@ws/agent';
import { desktopImage, freePort, HEX32, waitFor } from './harness';

/**
 * The compose deployment for real (issue 23, points 1-2): docker-compose.yml with the service image built from the
 * Dockerfile (FROM a Debian base with the project's Node.js 24) and PostgreSQL and Redis images made from Debian
 * packages (scripts/build-compose-images.sh; npm test passes their tags), under a project name of its own, the api
 * on a loopback port. The host's Docker is registered through the cli inside the api container, a workspace goes
 * request → running → destroyed over HTTP, and the stack goes down leaving no container, network or volume.
 */
const REPO = join(__dirname, '..', '..');
const COMPOSE_FILE = join(REPO, 'docker-compose.yml');

interface ComposeImages { app: string; postgres: string; redis: string }

/** The images npm test built (its environment), else built here (cached by recipe and source hash). */
function composeImages(): ComposeImages {
  if (!process.env.WS_COMPOSE_IMAGE || !process.env.WS_COMPOSE_POSTGRES_IMAGE || !process.env.WS_COMPOSE_REDIS_IMAGE) {
    const out = execFileSync('bash', ['scripts/build-compose-images.sh'], { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 1_800_000 });
    for (const line of out.split('\n')) {
      const at = line.indexOf('=');
      if (line.startsWith('WS_COMPOSE_') && at > 0) process.env[line.slice(0, at)] = line.slice(at + 1);
    }
  }
  return { app: process.env.WS_COMPOSE_IMAGE as string, postgres: process.env.WS_COMPOSE_POSTGRES_IMAGE as string, redis: process.env.WS_COMPOSE_REDIS_IMAGE as string };
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd: REPO, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stderr}\n${stdout}`.slice(0, 8000)));
      else resolve(stdout.trim());
    });
  });
}

const docker = (args: string[], timeoutMs = 60_000) => run('docker', args, timeoutMs);
const lines = (out: string) => out.split('\n').filter(Boolean);

describe('docker-compose.yml (issue 23)', () => {
  const project = `wscompose${randomBytes(4).toString('hex')}`;
  const envDir = mkdtempSync(join(tmpdir(), 'ws-compose-'));
  const envFile = join(envDir, 'compose.env');
  let port = 0;
  let base = '';
  let key: { api_key: string; api_key_secret: string };

  const compose = (args: string[], timeoutMs = 120_000) => run('docker-compose', ['-p', project, '-f', COMPOSE_FILE, '--env-file', envFile, ...args], timeoutMs);
  const cli = (...args: string[]) => compose(['exec', '-T', 'api', 'node', 'dist/apps/cli/src/main.js', ...args]);
  const call = async (operation: string, body: Record<string, unknown> = {}) => {
    const res = await fetch(`${base}/api/public/${operation}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...key, ...body }) });
    return { status: res.status, body: await res.json() };
  };
  /** What the project and its workspaces left on the host's Docker. */
  const leftovers = async () => ({
    containers: lines(await docker(['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`])),
    workspaces: lines(await docker(['ps', '-aq', '--filter', `label=${LABELS.deploymentId}=${project}`])),
    networks: lines(await docker(['network', 'ls', '-q', '--filter', `label=com.docker.compose.project=${project}`])),
    volumes: lines(await docker(['volume', 'ls', '-q', '--filter', `label=com.docker.compose.project=${project}`])),
  });
  const down = async () => {
    await compose(['down', '--volumes', '--remove-orphans', '--timeout', '40'], 180_000).catch((err) => console.error(String(err)));
    // Workspaces the compose worker started (labelled with this deployment id, which is the project name).
    const workspaces = lines(await docker(['ps', '-aq', '--filter', `label=${LABELS.deploymentId}=${project}`]).catch(() => ''));
    if (workspaces.length) await docker(['rm', '-f', '-v', ...workspaces]).catch((err) => console.error(String(err)));
  };

  beforeAll(async () => {
    const images = composeImages();
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const secret = () => randomBytes(24).toString('hex');
    writeFileSync(envFile, [
      `POSTGRES_PASSWORD=${secret()}`, `REDIS_PASSWORD=${secret()}`, `STORAGE_SIGNING_SECRET=${secret()}`,
      `DOCKER_GID=${statSync('/var/run/docker.sock').gid}`, `API_PUBLISH_PORT=${port}`, `PUBLIC_BASE_URL=${base}`,
      `DEPLOYMENT_ID=${project}`, `WORKSPACE_SERVER_IMAGE=${images.app}`, `POSTGRES_IMAGE=${images.postgres}`, `REDIS_IMAGE=${images.redis}`, '',
    ].join('\n'), { mode: 0o600 });
    // up -d returns once postgres and redis are healthy, the migration has completed and api and worker started.
    await compose(['up', '-d', '--no-build'], 300_000);
  }, 2_400_000);

  afterAll(async () => {
    await down();
    rmSync(envDir, { recursive: true, force: true });
  }, 300_000);

  it('starts: the migration completed, the api answers ready on its loopback port and its image health check passes', async () => {
    const migrate = lines(await compose(['ps', '-q', 'migrate']))[0];
    expect(await docker(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', migrate])).toBe('exited 0');
    const ready = await waitFor('the api ready', async () => {
      const res = await fetch(`${base}/api/health`).catch(() => null);
      return res?.status === 200 ? res.json() : undefined;
    }, 120_000, 250);
    expect(ready).toEqual({ status: 'ok' });
    const api = lines(await compose(['ps', '-q', 'api']))[0];
    await waitFor('the api container healthy', async () => ((await docker(['inspect', '--format', '{{.State.Health.Status}}', api])) === 'healthy' ? true : undefined), 120_000, 1000);
    // Ports on loopback only; the services run as unprivileged users.
    expect(await docker(['port', api, '8080/tcp'])).toBe(`127.0.0.1:${port}`);
    expect(await docker(['exec', api, 'id', '-u'])).not.toBe('0');
    // tini is PID 1, node its child.
    expect((await docker(['exec', api, 'cat', '/proc/1/cmdline'])).split('\0')[0]).toMatch(/tini$/);
    const worker = lines(await compose(['ps', '-q', 'worker']))[0];
    expect(await docker(['inspect', '--format', '{{.State.Running}} {{.Config.User}}', worker])).toBe('true node');
  });

  it('registers the host Docker and the desktop image through the cli in the api container, then request → running → destroy over HTTP', async () => {
    // The api and worker containers reach published workspace ports on the host's address on Docker's default
    // bridge (docker0), which stays the same when the project's own network is made anew.
    const gateway = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(await run('ip', ['-4', '-o', 'addr', 'show', 'docker0'], 10_000))?.[1];
    expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    await cli('server', 'add', 'local', '--endpoint', 'unix:///var/run/docker.sock', '--publish-host', gateway as string, '--cores', '2', '--memory', '4G');
    await cli('image', 'add', desktopImage(), '--friendly-name', 'Desktop', '--cores', '1', '--memory', '1G', '--port', 'vnc=5900/tcp');
    key = JSON.parse(await cli('api-key', 'create', '--name', 'compose-test', '--permission', 'Global Admin', '--json'));
    // With a host registered, the worker's /readyz (its compose health check) passes.
    const worker = lines(await compose(['ps', '-q', 'worker']))[0];
    await waitFor('the worker container healthy', async () => ((await docker(['inspect', '--format', '{{.State.Health.Status}}', worker])) === 'healthy' ? true : undefined), 120_000, 1000);

    const userId = (await call('create_user', { target_user: { username: 'compose-user' } })).body.user.user_id as string;
    const images = (await call('get_images')).body.images as Array<{ image_id: string; friendly_name: string }>;
    const imageId = images.find((i) => i.friendly_name === 'Desktop')?.image_id as string;
    expect(imageId).toMatch(HEX32);
    const requested = await call('request_workspace', { user_id: userId, image_id: imageId });
    expect(requested.status).toBe(200);
    const workspaceId = requested.body.workspace_id as string;

    const status = await waitFor('the workspace running', async () => {
      const res = await call('get_workspace_status', { workspace_id: workspaceId, user_id: userId });
      if (res.body.workspace?.operational_status === 'running') return res.body;
      if (res.body.workspace?.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(res.body)}`);
      return undefined;
    }, 240_000, 500);
    expect(status.workspace).toEqual(expect.objectContaining({ workspace_id: workspaceId, hostname: 'local', host: gateway }));
    const containerId = status.workspace.container_id as string;
    expect(await docker(['inspect', '--format', `{{index .Config.Labels "${LABELS.deploymentId}"}}`, containerId])).toBe(project);

    expect((await call('destroy_workspace', { workspace_id: workspaceId, user_id: userId })).body).toEqual({});
    const removed = await waitFor('the workspace removed', async () => {
      const res = await call('get_workspace_status', { workspace_id: workspaceId, user_id: userId });
      return res.status === 400 ? res.body : undefined;
    }, 120_000, 500);
    expect(removed).toEqual({ error_message: `Invalid workspace_id (${workspaceId})` });
    await expect(docker(['inspect', containerId])).rejects.toThrow();
  });

  it('the committed .env.example is complete, and without the secrets the file refuses to start, naming them', async () => {
    const config = (file: string) => run('docker-compose', ['-p', `${project}cfg`, '-f', COMPOSE_FILE, '--env-file', file, 'config', '-q'], 30_000);
    await expect(config(join(REPO, '.env.example'))).resolves.toBe('');
    const empty = join(envDir, 'empty.env');
    writeFileSync(empty, '');
    await expect(config(empty)).rejects.toThrow(/POSTGRES_PASSWORD/);
  });

  it('comes down leaving no container, network or volume behind', async () => {
    await down();
    expect(await leftovers()).toEqual({ containers: [], workspaces: [], networks: [], volumes: [] });
  });
});
