import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { LABELS } from './labels';
import { DockerHost, parseDockerEndpoint, WorkspaceContainerSpec } from './docker-host';
import {
  ContainerConflictError,
  DockerDaemonError,
  DockerTimeoutError,
  ExecUserNotAllowedError,
  ImageNotFoundError,
  InvalidContainerSpecError,
  InvalidDockerEndpointError,
  InvalidExecOptionsError,
} from './errors';

function daemonError(statusCode: number, message: string): Error {
  return Object.assign(new Error(`(HTTP code ${statusCode}) unexpected - ${message} `), { statusCode, json: { message } });
}

/** A dockerode stand-in: only the methods a test sets exist. */
function fakeHost(parts: Record<string, unknown>, requestTimeoutMs = 30_000) {
  return new DockerHost(parts as unknown as Docker, 'test-server', requestTimeoutMs);
}

const spec: WorkspaceContainerSpec = {
  name: 'ws-1',
  image: 'img:1',
  cores: 1.5,
  memoryBytes: 512 * 1024 * 1024,
  env: { A: 'b c' },
  labels: { [LABELS.workspaceId]: '1', [LABELS.deploymentId]: 'd' },
  ports: { vnc: '5900/tcp' },
};

describe('parseDockerEndpoint', () => {
  it('unix', () => {
    expect(parseDockerEndpoint({ endpoint: 'unix:///var/run/docker.sock' })).toEqual({ options: { socketPath: '/var/run/docker.sock' }, display: 'unix:///var/run/docker.sock' });
  });
  it('tcp without and with TLS', () => {
    expect(parseDockerEndpoint({ endpoint: 'tcp://10.0.0.5:2375' }).options).toEqual({ host: '10.0.0.5', port: 2375, protocol: 'http' });
    const dir = mkdtempSync(join(tmpdir(), 'agent-tls-'));
    for (const f of ['ca.pem', 'cert.pem', 'key.pem']) writeFileSync(join(dir, f), `${f}-content`);
    const parsed = parseDockerEndpoint({ endpoint: 'tcp://docker.example', tlsCaPath: join(dir, 'ca.pem'), tlsCertPath: join(dir, 'cert.pem'), tlsKeyPath: join(dir, 'key.pem') });
    expect(parsed.options).toMatchObject({ host: 'docker.example', port: 2376, protocol: 'https' });
    expect(String(parsed.options.ca)).toBe('ca.pem-content');
    expect(String(parsed.options.key)).toBe('key.pem-content');
    expect(parsed.display).toBe('https://docker.example:2376');
  });
  it('ssh', () => {
    const parsed = parseDockerEndpoint({ endpoint: 'ssh://deploy@host.example:2222' });
    expect(parsed.options).toMatchObject({ protocol: 'ssh', host: 'host.example', port: 2222, username: 'deploy' });
    expect(parsed.display).toBe('ssh://deploy@host.example:2222');
  });
  it.each([
    ['nonsense', /expected unix/],
    ['ftp://x', /unsupported scheme/],
    ['unix://relative.sock', /absolute socket path/],
    ['ssh://u:pw@host', /passwords/],
  ])('rejects %s', (endpoint, message) => {
    expect(() => parseDockerEndpoint({ endpoint })).toThrow(InvalidDockerEndpointError);
    expect(() => parseDockerEndpoint({ endpoint })).toThrow(message);
  });
  it('rejects unreadable TLS files and a cert without a key', () => {
    expect(() => parseDockerEndpoint({ endpoint: 'tcp://h:2376', tlsCaPath: '/nonexistent/ca.pem' })).toThrow(/cannot read TLS CA/);
    expect(() => parseDockerEndpoint({ endpoint: 'tcp://h:2376', tlsCertPath: '/x' })).toThrow(/both a certificate and a key/);
  });
  it('fromEndpoint names the host after the server', () => {
    expect(DockerHost.fromEndpoint({ endpoint: 'unix:///var/run/docker.sock', name: 'docker-7' }).name).toBe('docker-7');
    expect(DockerHost.fromEndpoint({ endpoint: 'unix:///var/run/docker.sock' }).name).toBe('unix:///var/run/docker.sock');
  });
});

describe('DockerHost (fake daemon)', () => {
  it('creates with the security and resource settings', async () => {
    const createContainer = jest.fn(async (_opts: Docker.ContainerCreateOptions) => ({ id: 'c1' }));
    await expect(fakeHost({ createContainer }).createWorkspaceContainer(spec)).resolves.toEqual({ containerId: 'c1', created: true });
    const body = createContainer.mock.calls[0][0];
    expect(body).toMatchObject({
      name: 'ws-1',
      Image: 'img:1',
      Env: ['A=b c'],
      Labels: { ...spec.labels, [LABELS.ports]: '{"vnc":"5900/tcp"}' },
      ExposedPorts: { '5900/tcp': {} },
      HostConfig: {
        NanoCpus: 1_500_000_000,
        Memory: 512 * 1024 * 1024,
        MemorySwap: 512 * 1024 * 1024,
        PortBindings: { '5900/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] },
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges:true'],
        PidsLimit: 2048,
      },
    });
    expect(body.User).toBeUndefined();
  });

  it('adopts the existing container on a name conflict', async () => {
    const createContainer = jest.fn(async () => {
      throw daemonError(409, 'Conflict. The container name "/ws-1" is already in use by container "abc". You have to remove (or rename) that container to be able to reuse that name.');
    });
    const getContainer = jest.fn(() => ({ inspect: async () => ({ Id: 'abc', Config: { Labels: { ...spec.labels } } }) }));
    await expect(fakeHost({ createContainer, getContainer }).createWorkspaceContainer(spec)).resolves.toEqual({ containerId: 'abc', created: false });
    expect(getContainer).toHaveBeenCalledWith('ws-1');
  });

  it('waits for a name reserved by a concurrent create that is not inspectable yet', async () => {
    const createContainer = async () => {
      throw daemonError(409, 'Conflict. The container name "/ws-1" is already in use by container "abc".');
    };
    let inspections = 0;
    const getContainer = () => ({
      inspect: async () => {
        if (++inspections < 3) throw daemonError(404, 'No such container: ws-1');
        return { Id: 'abc', Config: { Labels: { ...spec.labels } } };
      },
    });
    await expect(fakeHost({ createContainer, getContainer }).createWorkspaceContainer(spec)).resolves.toEqual({ containerId: 'abc', created: false });
    expect(inspections).toBe(3);
  });

  it('gives up on a name that stays reserved with a transient error', async () => {
    const createContainer = async () => {
      throw daemonError(409, 'Conflict. The container name "/ws-1" is already in use by container "abc".');
    };
    const getContainer = () => ({
      inspect: async () => {
        throw daemonError(404, 'No such container: ws-1');
      },
    });
    const err = await fakeHost({ createContainer, getContainer }, 200).createWorkspaceContainer(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DockerDaemonError);
    expect((err as DockerDaemonError).transient).toBe(true);
  });

  it('refuses to adopt a container of another workspace', async () => {
    const createContainer = async () => {
      throw daemonError(409, 'Conflict. The container name "/ws-1" is already in use by container "abc".');
    };
    const getContainer = () => ({ inspect: async () => ({ Id: 'abc', Config: { Labels: { [LABELS.workspaceId]: 'other' } } }) });
    await expect(fakeHost({ createContainer, getContainer }).createWorkspaceContainer(spec)).rejects.toThrow(ContainerConflictError);
  });

  it('reports a missing image as permanent', async () => {
    const createContainer = async () => {
      throw daemonError(404, 'No such image: img:1');
    };
    const err = await fakeHost({ createContainer }).createWorkspaceContainer(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect((err as Error).message).toBe('Image img:1 is not present on server test-server');
  });

  it('validates the spec before calling Docker', async () => {
    const createContainer = jest.fn();
    const host = fakeHost({ createContainer });
    await expect(host.createWorkspaceContainer({ ...spec, name: '-bad' })).rejects.toThrow(InvalidContainerSpecError);
    await expect(host.createWorkspaceContainer({ ...spec, ports: { vnc: '5900' } })).rejects.toThrow(/5900\/tcp/);
    await expect(host.createWorkspaceContainer({ ...spec, memoryBytes: 10 })).rejects.toThrow(/memoryBytes/);
    await expect(host.createWorkspaceContainer({ ...spec, env: { 'A-B': 'x' } })).rejects.toThrow(/not valid/);
    await expect(host.createWorkspaceContainer({ ...spec, capAdd: ['SYS_ADMIN'] })).rejects.toThrow(/not allowed/);
    expect(createContainer).not.toHaveBeenCalled();
  });

  it('start treats 304 as success; remove treats 404 and removal-in-progress as success', async () => {
    const host = fakeHost({
      getContainer: (id: string) => ({
        start: async () => {
          throw daemonError(304, 'container already started');
        },
        remove: async () => {
          throw id === 'gone' ? daemonError(404, 'No such container: gone') : daemonError(409, 'removal of container busy is already in progress');
        },
      }),
    });
    await expect(host.start('c1')).resolves.toBeUndefined();
    await expect(host.remove('gone')).resolves.toBeUndefined();
    await expect(host.remove('busy')).resolves.toBeUndefined();
  });

  it('maps inspect output', async () => {
    const host = fakeHost({
      getContainer: () => ({
        inspect: async () => ({
          Id: 'c1',
          Name: '/ws-1',
          Config: { Image: 'img:1', Labels: { [LABELS.ports]: '{"vnc":"5900/tcp","audio":"4901/tcp"}' } },
          State: { Running: true, Status: 'running', ExitCode: 0, StartedAt: '2025-01-02T03:04:05.123456789Z', FinishedAt: '0001-01-01T00:00:00Z', OOMKilled: false, Error: '' },
          NetworkSettings: {
            IPAddress: '',
            Networks: { bridge: { IPAddress: '172.17.0.3' } },
            Ports: { '5900/tcp': [{ HostIp: '127.0.0.1', HostPort: '49153' }], '4901/tcp': null },
          },
        }),
      }),
    });
    const state = await host.inspect('c1');
    expect(state).toMatchObject({ id: 'c1', name: 'ws-1', running: true, status: 'running', ip: '172.17.0.3', hostPorts: { vnc: 49153 }, exitCode: 0, finishedAt: null });
    expect(state.startedAt?.toISOString()).toBe('2025-01-02T03:04:05.123Z');
    expect((await host.inspect('c1', { remote: '5900/tcp' })).hostPorts).toEqual({ remote: 49153 });
  });

  it('bounds calls that never answer', async () => {
    const host = fakeHost({ ping: () => new Promise(() => undefined) }, 50);
    const err = await host.ping().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DockerTimeoutError);
    expect((err as DockerTimeoutError).transient).toBe(true);
  });

  it('imageExists is false on 404', async () => {
    const host = fakeHost({
      getImage: (ref: string) => ({
        inspect: async () => {
          if (ref === 'missing:1') throw daemonError(404, 'No such image: missing:1');
          return { Id: 'sha256:x' };
        },
      }),
    });
    await expect(host.imageExists('missing:1')).resolves.toBe(false);
    await expect(host.imageExists('img:1')).resolves.toBe(true);
  });

  it('listByLabels needs a label', async () => {
    await expect(fakeHost({}).listByLabels({})).rejects.toThrow(InvalidContainerSpecError);
  });

  describe('exec validation happens before Docker is called', () => {
    const getContainer = jest.fn();
    const host = fakeHost({ getContainer });
    afterEach(() => expect(getContainer).not.toHaveBeenCalled());

    it.each(['bob', 'workspace', '0', 'ROOT', '', null, 0])('rejects user %j', async (user) => {
      const err = await host.exec('c1', { cmd: 'id', user: user as 'root' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ExecUserNotAllowedError);
      expect((err as ExecUserNotAllowedError).transient).toBe(false);
      expect((err as Error).message).toContain('is not allowed');
    });
    it.each([
      [{ cmd: '' }, /non-empty/],
      [{ cmd: 'id', environment: { 'A B': 'x' } }, /not valid/],
      [{ cmd: 'id', workdir: 'tmp' }, /absolute/],
      [{ cmd: 'id', maxOutputBytes: -1 }, /maxOutputBytes/],
      [{ cmd: 'id', timeoutMs: 0 }, /timeoutMs/],
    ])('rejects %j', async (options, message) => {
      await expect(host.exec('c1', options)).rejects.toThrow(InvalidExecOptionsError);
      await expect(host.exec('c1', options)).rejects.toThrow(message);
    });
  });
});
