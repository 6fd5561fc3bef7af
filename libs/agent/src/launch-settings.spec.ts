import { InvalidContainerSpecError } from './errors';
import { effectiveCpuAllocation, parseCpuAllocationMethod, parseRunConfig, parseSize, parseVolumeMappings, usernameForPath } from './launch-settings';

const refused = (fn: () => unknown, message: RegExp) => {
  expect(fn).toThrow(InvalidContainerSpecError);
  expect(fn).toThrow(message);
};

describe('parseRunConfig', () => {
  it('takes the documented subset and normalizes it', () => {
    expect(
      parseRunConfig({
        hostname: 'desk-1.example', shm_size: '1g', devices: ['/dev/dri/renderD128', '/dev/snd:/dev/snd:rw'], add_host: ['db.internal:10.1.2.3', 'v6:fd00::1'],
        security_opt: ['no-new-privileges', 'apparmor:docker-default', 'label=type:container_t'],
      }),
    ).toEqual({
      hostname: 'desk-1.example',
      shmSizeBytes: 1024 ** 3,
      devices: [
        { pathOnHost: '/dev/dri/renderD128', pathInContainer: '/dev/dri/renderD128', cgroupPermissions: 'rwm' },
        { pathOnHost: '/dev/snd', pathInContainer: '/dev/snd', cgroupPermissions: 'rw' },
      ],
      extraHosts: ['db.internal:10.1.2.3', 'v6:fd00::1'],
      securityOpt: ['apparmor=docker-default', 'label=type:container_t'],
    });
    expect(parseRunConfig({})).toEqual({});
    expect(parseRunConfig(null)).toEqual({});
  });

  it('refuses what would undo the hardening, by name', () => {
    refused(() => parseRunConfig({ privileged: true }), /run_config\.privileged is not allowed: it would undo the workspace hardening/);
    refused(() => parseRunConfig({ cap_add: ['SYS_ADMIN'] }), /run_config\.cap_add is not allowed/);
    refused(() => parseRunConfig({ network: 'host' }), /run_config\.network is not allowed/);
    refused(() => parseRunConfig({ security_opt: ['no-new-privileges:false'] }), /would undo the workspace hardening/);
    refused(() => parseRunConfig({ security_opt: ['no-new-privileges=false'] }), /would undo the workspace hardening/);
  });

  it('refuses sandbox-weakening security options unless the operator allows them', () => {
    refused(() => parseRunConfig({ security_opt: ['seccomp=unconfined'] }), /WORKSPACE_SECURITY_OPTS_ALLOWED/);
    refused(() => parseRunConfig({ security_opt: ['apparmor:unconfined'] }), /WORKSPACE_SECURITY_OPTS_ALLOWED/);
    refused(() => parseRunConfig({ security_opt: ['label=disable'] }, ['seccomp=unconfined']), /WORKSPACE_SECURITY_OPTS_ALLOWED/);
    expect(parseRunConfig({ security_opt: ['seccomp:unconfined'] }, ['seccomp=unconfined']).securityOpt).toEqual(['seccomp=unconfined']);
    refused(() => parseRunConfig({ security_opt: ['seccomp=/etc/profile.json'] }), /custom seccomp profiles are not supported/);
    refused(() => parseRunConfig({ security_opt: ['something'] }), /is not allowed; allowed:/);
  });

  it('refuses unknown keys and malformed values with the key named', () => {
    refused(() => parseRunConfig({ hostnme: 'x' }), /run_config\.hostnme is not a supported option; supported: hostname, shm_size, devices, add_host, security_opt/);
    refused(() => parseRunConfig('hostname=x'), /run_config must be an object/);
    refused(() => parseRunConfig({ hostname: 'bad_name!' }), /run_config\.hostname/);
    refused(() => parseRunConfig({ hostname: `${'a'.repeat(64)}` }), /run_config\.hostname/);
    refused(() => parseRunConfig({ shm_size: '12 parsecs' }), /run_config\.shm_size must be a size/);
    refused(() => parseRunConfig({ shm_size: '100g' }), /between 1m and 64g/);
    refused(() => parseRunConfig({ devices: ['/etc/passwd'] }), /must be a path under \/dev\//);
    refused(() => parseRunConfig({ devices: ['/dev/../etc/shadow'] }), /must be a path under \/dev\//);
    refused(() => parseRunConfig({ devices: ['/dev/dri:/dev/dri:rwx'] }), /letters of rwm/);
    refused(() => parseRunConfig({ devices: [42] }), /list of strings/);
    refused(() => parseRunConfig({ add_host: ['db:not-an-ip'] }), /name:address/);
    refused(() => parseRunConfig({ add_host: [':10.0.0.1'] }), /name:address/);
    refused(() => parseRunConfig({ add_host: Array(33).fill('a:10.0.0.1') }), /at most 32/);
  });
});

describe('parseSize', () => {
  it('reads docker sizes', () => {
    expect(parseSize('512m', 's')).toBe(512 * 1024 ** 2);
    expect(parseSize('512MB', 's')).toBe(512 * 1024 ** 2);
    expect(parseSize('2097152', 's')).toBe(2 * 1024 ** 2);
    expect(parseSize(67108864, 's')).toBe(64 * 1024 ** 2);
    expect(parseSize('1048576b', 's')).toBe(1024 ** 2);
    expect(() => parseSize('1k', 's')).toThrow(/between/);
  });
});

describe('parseVolumeMappings', () => {
  const values = { username: 'ada', userId: '1b2c3d4e-0000-4000-8000-00000000abcd', imageId: '99999999-0000-4000-8000-000000000001' };

  it('fills the templates: bind mounts and named volumes', () => {
    expect(
      parseVolumeMappings(
        {
          '/srv/homes/{username}/{user_id}': { bind: '/home/user/data', mode: 'rw' },
          'ws-{image_id}-{user_id}': { bind: '/cache', mode: 'ro' },
          '/srv/shared': { bind: '/shared' },
        },
        values,
      ),
    ).toEqual([
      { kind: 'bind', source: '/srv/homes/ada/1b2c3d4e00004000800000000000abcd', target: '/home/user/data', readOnly: false },
      { kind: 'volume', source: 'ws-99999999000040008000000000000001-1b2c3d4e00004000800000000000abcd', target: '/cache', readOnly: true },
      { kind: 'bind', source: '/srv/shared', target: '/shared', readOnly: false },
    ]);
  });

  it('encodes usernames so no two users share a path and none climbs out', () => {
    const source = (username: string) => parseVolumeMappings({ '/srv/homes/{username}': { bind: '/data' } }, { ...values, username })[0].source;
    expect(source('..')).toBe('/srv/homes/%2E.');
    expect(source('.')).toBe('/srv/homes/%2E');
    expect(source('a/../../etc')).toBe('/srv/homes/a%2F..%2F..%2Fetc');
    expect(source('a/b')).not.toBe(source('a_b'));
    expect(source('a%2Fb')).not.toBe(source('a/b'));
    expect(source('jo.smith@example.com')).toBe('/srv/homes/jo.smith%40example.com');
    expect(usernameForPath('ümit')).toBe('%C3%BCmit');
    expect(usernameForPath('')).toBe('%00');
  });

  it('refuses paths that are not absolute and clean, forbidden host paths, unknown templates', () => {
    refused(() => parseVolumeMappings({ 'srv/{username}': { bind: '/data' } }), /volume name .* must be letters/);
    refused(() => parseVolumeMappings({ '/srv/../etc': { bind: '/data' } }), /must be absolute, without "\.\."/);
    refused(() => parseVolumeMappings({ '/srv/{user_id}/..': { bind: '/data' } }), /must be absolute, without "\.\."/);
    refused(() => parseVolumeMappings({ '/srv//x': { bind: '/data' } }), /must be absolute/);
    refused(() => parseVolumeMappings({ '/var/run/docker.sock': { bind: '/sock' } }), /is not allowed/);
    refused(() => parseVolumeMappings({ '/': { bind: '/host' } }), /is not allowed/);
    refused(() => parseVolumeMappings({ '/etc/shadow': { bind: '/x' } }), /is not allowed/);
    refused(() => parseVolumeMappings({ '/srv/{home}': { bind: '/data' } }), /unknown template \{home\}/);
    refused(() => parseVolumeMappings({ '/srv/x': { bind: 'data' } }), /\.bind must be an absolute container path/);
    refused(() => parseVolumeMappings({ '/srv/x': { bind: '/data/../etc' } }), /\.bind must be an absolute container path/);
    refused(() => parseVolumeMappings({ '/srv/x': { bind: '/proc/x' } }), /\.bind may not be under/);
    refused(() => parseVolumeMappings({ '/srv/x': { bind: '/d' }, '/srv/y': { bind: '/d' } }), /mounted twice/);
    refused(() => parseVolumeMappings({ '/srv/x': { bind: '/d', mode: 'rwx' } }), /mode must be "rw" or "ro"/);
    refused(() => parseVolumeMappings({ '/srv/x': { bind: '/d', uid: 1000 } }), /unknown field uid/);
    refused(() => parseVolumeMappings({ '/srv/x:/y': { bind: '/d' } }), /must be absolute/);
    refused(() => parseVolumeMappings(['/srv/x']), /volume_mappings must be an object/);
  });

  it('needs a user for user templates (a staged workspace has none)', () => {
    refused(() => parseVolumeMappings({ '/srv/{user_id}': { bind: '/d' } }, { imageId: values.imageId }), /needs a user/);
    expect(parseVolumeMappings({ '/srv/{image_id}': { bind: '/d' } }, { imageId: values.imageId })[0].source).toBe('/srv/99999999000040008000000000000001');
  });
});

describe('cpu allocation', () => {
  it('resolves Inherit to the server method, Quotas by default', () => {
    expect(effectiveCpuAllocation('Inherit', 'Shares')).toBe('Shares');
    expect(effectiveCpuAllocation('Inherit', 'Quotas')).toBe('Quotas');
    expect(effectiveCpuAllocation('Inherit', null)).toBe('Quotas');
    expect(effectiveCpuAllocation(null, undefined)).toBe('Quotas');
    expect(effectiveCpuAllocation('Shares', 'Quotas')).toBe('Shares');
    expect(effectiveCpuAllocation('Quotas', 'Shares')).toBe('Quotas');
    refused(() => parseCpuAllocationMethod('quota'), /must be one of Inherit, Quotas, Shares/);
  });
});
