import { EgressConfigError, egressSidecarFiles } from './egress-sidecar-config';
import { egressEnvironment } from './egress-connections.service';

const KEY = 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=';
const PEER = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
const reservation = (config: Record<string, unknown>, fields: { type?: string; endpoint?: string; key?: string | null } = {}) => ({
  provider: { type: fields.type ?? 'key_pair_tunnel', name: 'wg' },
  gateway: { id: '0f8fad5b-d9cb-469f-a165-70867728950e', name: 'exit-1', endpoint: fields.endpoint ?? 'vpn.example.com:51820', config },
  credential: { vpnPrivateKey: fields.key === undefined ? KEY : fields.key, username: null, password: null, meshKey: null, customCredential: null },
});

describe('egressSidecarFiles (key_pair_tunnel)', () => {
  it('writes the WireGuard peer config (secret, 0600) and the tunnel settings with their defaults', () => {
    const out = egressSidecarFiles(reservation({ public_key: PEER, address: '10.9.0.2/32', dns: ['10.9.0.1'] }));
    expect(out?.files.type).toEqual({ content: 'key_pair_tunnel\n', mode: 0o644 });
    expect(out?.files['wg0.conf']).toEqual({
      content: `[Interface]\nPrivateKey = ${KEY}\n\n[Peer]\nPublicKey = ${PEER}\nEndpoint = vpn.example.com:51820\nAllowedIPs = 0.0.0.0/0\nPersistentKeepalive = 25\n`,
      mode: 0o600,
    });
    expect(out?.files['tunnel.env'].content).toBe('ENDPOINT=vpn.example.com:51820\nADDRESS=10.9.0.2/32\nALLOWED_IPS=0.0.0.0/0\nDNS=10.9.0.1\nMTU=1420\n');
    expect(out?.files['tunnel.env'].content).not.toContain(KEY);
  });

  it('is null for a provider type that has no sidecar yet', () => {
    expect(egressSidecarFiles(reservation({}, { type: 'username_password_vpn' }))).toBeNull();
  });

  it('refuses what cannot make a tunnel (or could inject lines), naming the gateway', () => {
    const bad = (config: Record<string, unknown>, fields = {}) => () => egressSidecarFiles(reservation(config, fields));
    expect(bad({ address: '10.9.0.2/32' })).toThrow(new EgressConfigError('bad configuration of the egress gateway exit-1: config.public_key must be the gateway\'s WireGuard public key'));
    expect(bad({ public_key: PEER })).toThrow(/exit-1: config.address must be CIDR addresses/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32\nPostUp = sh' })).toThrow(/config.address/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32' }, { key: 'not-a-key' })).toThrow(/vpn_private_key is not a WireGuard key/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32' }, { endpoint: 'vpn.example.com' })).toThrow(/endpoint must be host:port/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32', mtu: 'big' })).toThrow(/config.mtu/);
  });

  it('keeps the secret out of the workspace container\'s environment for this type', () => {
    const env = egressEnvironment(reservation({ public_key: PEER }) as never);
    expect(env.EGRESS_PROVIDER_TYPE).toBe('key_pair_tunnel');
    expect(env).not.toHaveProperty('EGRESS_VPN_PRIVATE_KEY');
  });
});
