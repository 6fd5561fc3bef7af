import {
  classifyDockerError,
  ContainerConflictError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  DockerDaemonError,
  DockerUnavailableError,
  ExecUserNotAllowedError,
  ImageNotFoundError,
  InvalidContainerConfigError,
  isTransientDockerError,
  RfbTimeoutError,
} from './errors';

/** The shape docker-modem gives daemon errors. */
function daemonError(statusCode: number, message: string): Error {
  return Object.assign(new Error(`(HTTP code ${statusCode}) unexpected - ${message} `), { statusCode, reason: 'x', json: { message } });
}

function netError(code: string, message = `connect ${code} /var/run/docker.sock`): Error {
  return Object.assign(new Error(message), { code });
}

describe('isTransientDockerError', () => {
  it.each(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'EAI_AGAIN'])('%s is transient', (code) => {
    expect(isTransientDockerError(netError(code))).toBe(true);
  });
  it('socket hang up and a missing unix socket are transient', () => {
    expect(isTransientDockerError(new Error('socket hang up'))).toBe(true);
    expect(isTransientDockerError(netError('ENOENT'))).toBe(true);
  });
  it.each([500, 502, 503, 504])('HTTP %d is transient', (status) => {
    expect(isTransientDockerError(daemonError(status, 'driver failed programming external connectivity: port is already allocated'))).toBe(true);
  });
  it.each([
    [404, 'No such image: foo:1'],
    [400, 'invalid reference format'],
    [409, 'Conflict. The container name "/x" is already in use'],
    [500, 'No such image: foo:1'],
    [500, 'OCI runtime create failed: exec: "/nope": stat /nope: no such file or directory: unknown'],
    [500, 'invalid mount config for type "bind"'],
    [401, 'unauthorized'],
  ])('HTTP %d %s is permanent', (status, message) => {
    expect(isTransientDockerError(daemonError(status, message))).toBe(false);
  });
  it('unknown errors and EACCES are permanent', () => {
    expect(isTransientDockerError(new TypeError('x is undefined'))).toBe(false);
    expect(isTransientDockerError(netError('EACCES'))).toBe(false);
    expect(isTransientDockerError(null)).toBe(false);
  });
  it('agent errors answer with their own flag', () => {
    expect(isTransientDockerError(new RfbTimeoutError('127.0.0.1', 1, 10, 1, 'x'))).toBe(true);
    expect(isTransientDockerError(new ExecUserNotAllowedError('bob'))).toBe(false);
  });
});

describe('classifyDockerError', () => {
  const ctx = { host: 'docker-1', operation: 'create container ws-1' };
  it('missing image', () => {
    const err = classifyDockerError(daemonError(404, 'No such image: ws/desktop:nope'), { ...ctx, image: 'ws/desktop:nope' });
    expect(err).toBeInstanceOf(ImageNotFoundError);
    expect(err.message).toBe('Image ws/desktop:nope is not present on server docker-1');
    expect(err.transient).toBe(false);
  });
  it('missing container', () => {
    const err = classifyDockerError(daemonError(404, 'No such container: abc'), { ...ctx, containerId: 'abc' });
    expect(err).toBeInstanceOf(ContainerNotFoundError);
  });
  it('invalid config', () => {
    const err = classifyDockerError(daemonError(400, 'invalid CapAdd: unknown capability: "CAP_NOPE"'), ctx);
    expect(err).toBeInstanceOf(InvalidContainerConfigError);
    expect(err.message).toContain('unknown capability');
    expect(err.transient).toBe(false);
  });
  it('conflicts', () => {
    expect(classifyDockerError(daemonError(409, 'Container abc is not running'), { ...ctx, containerId: 'abc' })).toBeInstanceOf(ContainerNotRunningError);
    expect(classifyDockerError(daemonError(409, 'something else'), ctx)).toBeInstanceOf(ContainerConflictError);
  });
  it('daemon 5xx', () => {
    const err = classifyDockerError(daemonError(500, 'driver failed'), ctx);
    expect(err).toBeInstanceOf(DockerDaemonError);
    expect(err.transient).toBe(true);
    expect(err.message).toBe('Docker on server docker-1 failed to create container ws-1 (HTTP 500): driver failed');
  });
  it('connection failure keeps the cause', () => {
    const raw = netError('ECONNREFUSED');
    const err = classifyDockerError(raw, ctx);
    expect(err).toBeInstanceOf(DockerUnavailableError);
    expect(err.transient).toBe(true);
    expect(err.cause).toBe(raw);
    expect(err.message).toBe('Docker on server docker-1 is unreachable: connect ECONNREFUSED /var/run/docker.sock');
  });
});
