import { WORKSPACE_NETWORK } from '@ws/agent';
import { isHolder, poolKeyOf } from './network-holders';

describe('poolKeyOf', () => {
  const spec = { ports: { vnc: '5900/tcp', audio: '4901/tcp' }, network: WORKSPACE_NETWORK.name, publishHost: '127.0.0.1' };

  it('is the same for the same ports on the same address, in any order', () => {
    expect(poolKeyOf(spec)).toBe(poolKeyOf({ ...spec, ports: { audio: '4901/tcp', vnc: '5900/tcp' } }));
    expect(poolKeyOf({ ...spec, publishHost: undefined })).toBe(poolKeyOf(spec));
  });

  it('differs by port, by port name and by publish address', () => {
    const key = poolKeyOf(spec);
    expect(poolKeyOf({ ...spec, ports: { vnc: '5900/tcp' } })).not.toBe(key);
    expect(poolKeyOf({ ...spec, ports: { vnc: '5900/tcp', sound: '4901/tcp' } })).not.toBe(key);
    expect(poolKeyOf({ ...spec, publishHost: '10.0.0.5' })).not.toBe(key);
  });

  it('is null where the namespace would not be the workspace\'s to share: another network, a hostname, hosts entries, a sidecar', () => {
    expect(poolKeyOf({ ...spec, network: 'bridge' })).toBeNull();
    expect(poolKeyOf({ ...spec, hostname: 'desk' })).toBeNull();
    expect(poolKeyOf({ ...spec, extraHosts: ['db:10.0.0.2'] })).toBeNull();
    expect(poolKeyOf({ ...spec, networkContainer: 'abc' })).toBeNull();
  });
});

describe('isHolder', () => {
  it('knows a holder by its role label only', () => {
    expect(isHolder({ labels: { 'workspace-server.role': 'network-holder' } })).toBe(true);
    expect(isHolder({ labels: { 'workspace-server.role': 'egress' } })).toBe(false);
    expect(isHolder({ labels: {} })).toBe(false);
  });
});
