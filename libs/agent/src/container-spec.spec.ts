import { buildContainerSpec, BuildContainerSpecInput, localeFromLanguage, portsFromAttributes, validTimezone } from './container-spec';
import { LABELS } from './labels';
import { InvalidContainerSpecError } from './errors';
import { WORKSPACE_NETWORK } from './workspace-network';

const WS_ID = '0b6f2a52-6a1e-4a43-9d8a-3c1b2d7e9f10';

function input(overrides: Partial<BuildContainerSpecInput> = {}): BuildContainerSpecInput {
  return {
    workspace: { id: WS_ID, cores: 2, memory: 2147483648, token: 'secret-token' },
    image: { name: 'workspace-server/desktop:abc', isBrowser: false, xRes: 1920, yRes: 1080, execConfig: {}, attributes: [] },
    server: { publishHost: '127.0.0.1' },
    deploymentId: 'dep-1',
    ...overrides,
  };
}

describe('buildContainerSpec', () => {
  it('builds the basic spec', () => {
    const spec = buildContainerSpec(input());
    expect(spec).toEqual({
      name: `ws-${WS_ID}`,
      image: 'workspace-server/desktop:abc',
      cores: 2,
      memoryBytes: 2147483648,
      env: { X_RES: '1920', Y_RES: '1080', VNC_PORT: '5900', VNC_PASSWORD: 'secret-token' },
      labels: { [LABELS.workspaceId]: WS_ID, [LABELS.deploymentId]: 'dep-1' },
      ports: { vnc: '5900/tcp' },
      publishHost: '127.0.0.1',
      network: 'workspace-server-isolated',
      shmSizeBytes: 512 * 1024 * 1024,
      noNewPrivileges: true,
      cpuAllocation: 'Quotas',
    });
  });

  it('exports the label names', () => {
    expect(LABELS.workspaceId).toBe('workspace-server.workspace-id');
    expect(LABELS.deploymentId).toBe('workspace-server.deployment-id');
  });

  it('accepts numeric columns that arrive as strings and defaults resolution, publish host, shm', () => {
    const spec = buildContainerSpec(input({ workspace: { id: WS_ID, cores: '1.5', memory: '268435456' }, image: { name: 'img:1' }, server: null }));
    expect(spec.cores).toBe(1.5);
    expect(spec.memoryBytes).toBe(268435456);
    expect(spec.env).toEqual({ X_RES: '1280', Y_RES: '720', VNC_PORT: '5900' });
    expect(spec.publishHost).toBe('127.0.0.1');
    expect(spec.shmSizeBytes).toBe(64 * 1024 * 1024);
  });

  it('tells the image where its audio ports are (AUDIO_PORT, AUDIO_INPUT_PORT) when its port_map has them; a request cannot move them', () => {
    const attributes = [
      { category: 'port_map', name: 'vnc', value: '5900/tcp' },
      { category: 'port_map', name: 'audio', value: '4911/tcp' },
      { category: 'port_map', name: 'audio_input', value: '4912' },
    ];
    const spec = buildContainerSpec(input({ image: { name: 'img:1', attributes }, environment: { AUDIO_PORT: '1', AUDIO_INPUT_PORT: '2' } }));
    expect(spec.ports).toEqual({ vnc: '5900/tcp', audio: '4911/tcp', audio_input: '4912/tcp' });
    expect(spec.env).toMatchObject({ AUDIO_PORT: '4911', AUDIO_INPUT_PORT: '4912' });
  });

  it('layers image, request and derived environment, request cannot override reserved names', () => {
    const spec = buildContainerSpec(
      input({
        image: { name: 'img:1', xRes: 1280, yRes: 720, execConfig: { first_launch: { environment: { A: 'image', B: 'image', VNC_PORT: '1' } } } },
        environment: { B: 'request', C: 'request', VNC_PASSWORD: 'hijack', X_RES: '1', Y_RES: '1', VNC_PORT: '2', LANG: 'C', TZ: 'UTC' },
        clientLanguage: 'en-US',
        clientTimezone: 'Europe/Berlin',
      }),
    );
    expect(spec.env).toEqual({
      A: 'image',
      B: 'request',
      C: 'request',
      LANG: 'en_US.UTF-8',
      TZ: 'Europe/Berlin',
      X_RES: '1280',
      Y_RES: '720',
      VNC_PORT: '5900',
      VNC_PASSWORD: 'secret-token',
    });
  });

  it('keeps request LANG/TZ when the client values are invalid or absent', () => {
    const spec = buildContainerSpec(input({ environment: { LANG: 'de_DE.UTF-8', TZ: 'UTC' }, clientLanguage: 'english', clientTimezone: '../../etc/passwd' }));
    expect(spec.env.LANG).toBe('de_DE.UTF-8');
    expect(spec.env.TZ).toBe('UTC');
  });

  it('falls back to the stored workspace environment', () => {
    const spec = buildContainerSpec(input({ workspace: { id: WS_ID, cores: 1, memory: 1 << 30, environment: { FOO: 'bar' } } }));
    expect(spec.env.FOO).toBe('bar');
    expect(spec.env.VNC_PASSWORD).toBeUndefined();
  });

  it('rejects invalid environment names', () => {
    expect(() => buildContainerSpec(input({ environment: { 'BAD-NAME': 'x' } }))).toThrow(InvalidContainerSpecError);
    expect(() => buildContainerSpec(input({ environment: { '1X': 'x' } }))).toThrow(/not valid/);
    expect(() => buildContainerSpec(input({ environment: { X: 'a\0b' } }))).toThrow(/NUL/);
  });

  it('sets WORKSPACE_URL only for browser images with a valid http(s) url', () => {
    const browser = { name: 'browser:1', isBrowser: true };
    expect(buildContainerSpec(input({ image: browser, workspaceUrl: 'https://example.com/a?b=c' })).env.WORKSPACE_URL).toBe('https://example.com/a?b=c');
    expect(buildContainerSpec(input({ image: browser })).env.WORKSPACE_URL).toBeUndefined();
    expect(buildContainerSpec(input({ image: browser, workspaceUrl: 'javascript:alert(1)' })).env.WORKSPACE_URL).toBeUndefined();
    expect(buildContainerSpec(input({ image: { name: 'desktop:1', isBrowser: false }, workspaceUrl: 'https://example.com' })).env.WORKSPACE_URL).toBeUndefined();
  });

  it('maps port_map attributes and derives VNC_PORT', () => {
    const spec = buildContainerSpec(
      input({
        image: {
          name: 'img:1',
          attributes: [
            { category: 'port_map', name: 'vnc', value: '5901' },
            { category: 'port_map', name: 'audio', value: '4901/tcp' },
            { category: 'other', name: 'x', value: 'y' },
          ],
        },
      }),
    );
    expect(spec.ports).toEqual({ vnc: '5901/tcp', audio: '4901/tcp' });
    expect(spec.env.VNC_PORT).toBe('5901');
  });

  it('uses the image network only when the image is restricted to it, else the isolated workspace network', () => {
    expect(buildContainerSpec(input({ image: { name: 'i:1', restrictToNetwork: true, networkName: 'wsnet' } })).network).toBe('wsnet');
    expect(buildContainerSpec(input({ image: { name: 'i:1', restrictToNetwork: false, networkName: 'wsnet' } })).network).toBe(WORKSPACE_NETWORK.name);
    expect(() => buildContainerSpec(input({ image: { name: 'i:1', restrictToNetwork: true, networkName: null } }))).toThrow(/i:1 is restricted to a network but names none/);
  });

  it('puts the container on the image network even when the launch chose another, else on the chosen one', () => {
    expect(buildContainerSpec(input({ image: { name: 'i:1', restrictToNetwork: true, networkName: 'wsnet' }, network: 'other' })).network).toBe('wsnet');
    expect(buildContainerSpec(input({ image: { name: 'i:1', restrictToNetwork: false, networkName: 'wsnet' }, network: 'other' })).network).toBe('other');
  });

  it('turns no-new-privileges on unless told otherwise', () => {
    expect(buildContainerSpec(input()).noNewPrivileges).toBe(true);
    expect(buildContainerSpec(input({ noNewPrivileges: false })).noNewPrivileges).toBe(false);
  });

  it('rejects invalid resources', () => {
    expect(() => buildContainerSpec(input({ workspace: { id: WS_ID, cores: 0, memory: 1 << 30 } }))).toThrow(/cores/);
    expect(() => buildContainerSpec(input({ workspace: { id: WS_ID, cores: 1, memory: 'lots' } }))).toThrow(/memory/);
    expect(() => buildContainerSpec(input({ image: { name: 'i:1', xRes: 12 } }))).toThrow(/xRes/);
  });
});

describe('portsFromAttributes', () => {
  it('defaults vnc', () => {
    expect(portsFromAttributes(undefined)).toEqual({ vnc: '5900/tcp' });
    expect(portsFromAttributes([{ category: 'port_map', name: 'audio', value: '4901/udp' }])).toEqual({ audio: '4901/udp', vnc: '5900/tcp' });
  });
  it('rejects invalid entries', () => {
    expect(() => portsFromAttributes([{ category: 'port_map', name: 'vnc', value: '99999/tcp' }])).toThrow(InvalidContainerSpecError);
    expect(() => portsFromAttributes([{ category: 'port_map', name: 'vnc', value: 'abc' }])).toThrow(InvalidContainerSpecError);
    expect(() => portsFromAttributes([{ category: 'port_map', name: 'bad name', value: '5900' }])).toThrow(InvalidContainerSpecError);
  });
});

describe('localeFromLanguage', () => {
  it.each([
    ['en-US', 'en_US.UTF-8'],
    ['en_us', 'en_US.UTF-8'],
    ['de-DE', 'de_DE.UTF-8'],
    ['de', 'de_DE.UTF-8'],
    ['en', 'en_US.UTF-8'],
    ['ja', 'ja_JP.UTF-8'],
    ['fil-PH', 'fil_PH.UTF-8'],
    ['EN-US', 'en_US.UTF-8'],
    ['es-419', 'es_ES.UTF-8'],
    ['zh-Hant-TW', 'zh_TW.UTF-8'],
    ['zh-Hant', 'zh_TW.UTF-8'],
    ['zh-Hans', 'zh_CN.UTF-8'],
    ['sr-Latn-RS', 'sr_RS.UTF-8'],
  ])('%s → %s', (lang, locale) => expect(localeFromLanguage(lang)).toBe(locale));

  it.each(['english', 'en-USA', 'en-US.UTF-8', 'e', '', 'en US', 'en-US;rm -rf /', 'x'.repeat(36)])('ignores %j', (lang) => expect(localeFromLanguage(lang)).toBeNull());
  it('ignores non-strings', () => expect(localeFromLanguage(null)).toBeNull());
});

describe('validTimezone', () => {
  it.each(['UTC', 'Europe/Berlin', 'America/Argentina/Buenos_Aires', 'Etc/GMT+5', 'Etc/GMT-14', 'America/Port-au-Prince', 'EST5EDT', 'GMT0', 'Asia/Calcutta', 'Europe/Kyiv'])('accepts %s', (tz) => expect(validTimezone(tz)).toBe(tz));
  it.each(['', '../etc/passwd', 'Europe/Berlin;id', 'Europe//Berlin', '/UTC', 'Europe/Berlin ', 'A'.repeat(65), 'Europe/../../x', 'Nowhere/Atlantis', 'Europe/Berlin/x'])('ignores %j', (tz) => expect(validTimezone(tz)).toBeNull());
});

describe('buildContainerSpec: image launch settings', () => {
  const IMAGE_ID = '99999999-0000-4000-8000-000000000001';
  const user = { id: '1b2c3d4e-0000-4000-8000-00000000abcd', username: 'ada/lovelace' };

  it('applies run_config, volume_mappings with templates and the CPU allocation method', () => {
    const spec = buildContainerSpec(
      input({
        image: {
          id: IMAGE_ID, name: 'img:1', cpuAllocationMethod: 'Shares',
          runConfig: { hostname: 'desk', shm_size: '256m', devices: ['/dev/dri'], add_host: ['db:10.0.0.5'], security_opt: ['no-new-privileges:true', 'apparmor=docker-default'] },
          volumeMappings: { '/srv/homes/{username}': { bind: '/home/user/data' }, 'cache-{user_id}-{image_id}': { bind: '/cache', mode: 'ro' } },
        },
        user,
      }),
    );
    expect(spec).toEqual(expect.objectContaining({
      hostname: 'desk',
      shmSizeBytes: 256 * 1024 * 1024,
      devices: [{ pathOnHost: '/dev/dri', pathInContainer: '/dev/dri', cgroupPermissions: 'rwm' }],
      extraHosts: ['db:10.0.0.5'],
      securityOpt: ['apparmor=docker-default'],
      noNewPrivileges: true,
      cpuAllocation: 'Shares',
      mounts: [
        { kind: 'bind', source: '/srv/homes/ada%2Flovelace', target: '/home/user/data', readOnly: false },
        { kind: 'volume', source: 'cache-1b2c3d4e00004000800000000000abcd-99999999000040008000000000000001', target: '/cache', readOnly: true },
      ],
    }));
  });

  it('Inherit follows the server; an explicit shmSizeBytes still wins over run_config', () => {
    const image = { name: 'img:1', cpuAllocationMethod: 'Inherit', runConfig: { shm_size: '256m' } };
    expect(buildContainerSpec(input({ image, server: { cpuAllocationMethod: 'Shares' } })).cpuAllocation).toBe('Shares');
    expect(buildContainerSpec(input({ image, server: { cpuAllocationMethod: 'Quotas' } })).cpuAllocation).toBe('Quotas');
    expect(buildContainerSpec(input({ image, shmSizeBytes: 128 * 1024 * 1024 })).shmSizeBytes).toBe(128 * 1024 * 1024);
  });

  it('refuses at launch what the operator no longer allows (a row edited by hand, a shrunk allowlist)', () => {
    const image = { name: 'img:1', runConfig: { security_opt: ['seccomp=unconfined'] } };
    expect(() => buildContainerSpec(input({ image }))).toThrow(/WORKSPACE_SECURITY_OPTS_ALLOWED/);
    expect(buildContainerSpec(input({ image, allowedSecurityOpts: 'label=disable, seccomp=unconfined' })).securityOpt).toEqual(['seccomp=unconfined']);
    expect(() => buildContainerSpec(input({ image: { name: 'img:1', runConfig: { privileged: true } } }))).toThrow(InvalidContainerSpecError);
    expect(() => buildContainerSpec(input({ image: { name: 'img:1', volumeMappings: { '/srv/{user_id}': { bind: '/d' } } } }))).toThrow(/needs a user/);
  });

  it('adds no launch-setting keys for an image without them', () => {
    const spec = buildContainerSpec(input());
    for (const key of ['hostname', 'devices', 'extraHosts', 'securityOpt', 'mounts']) expect(spec).not.toHaveProperty(key);
  });
});
