import { execFileSync } from 'node:child_process';
import { EgressConfigError, egressSidecarFiles } from './egress-sidecar-config';
import { egressEnvironment } from './egress-connections.service';

const KEY = 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=';
const PEER = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
const CA = '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2Fh\nZmFrZQ==\n-----END CERTIFICATE-----';
const TLS = `-----BEGIN OpenVPN Static key V1-----\n${'0123456789abcdef'.repeat(2)}\n-----END OpenVPN Static key V1-----`;
type Fields = { type?: string; endpoint?: string; key?: string | null; username?: string | null; password?: string | null; custom?: string | null; mesh?: string | null };
const reservation = (config: unknown, fields: Fields = {}) => ({
  provider: { type: fields.type ?? 'key_pair_tunnel', name: 'wg' },
  gateway: { id: '0f8fad5b-d9cb-469f-a165-70867728950e', name: 'exit-1', endpoint: fields.endpoint ?? 'vpn.example.com:51820', config },
  credential: {
    vpnPrivateKey: fields.key === undefined ? KEY : fields.key, username: fields.username ?? null, password: fields.password ?? null,
    meshKey: fields.mesh ?? null, customCredential: fields.custom ?? null,
  },
});
const SECRETS = ['EGRESS_PASSWORD', 'EGRESS_VPN_PRIVATE_KEY', 'EGRESS_MESH_KEY', 'EGRESS_CUSTOM_CREDENTIAL'];

describe('egressSidecarFiles (key_pair_tunnel)', () => {
  it('writes the WireGuard peer config (secret, 0600) and the tunnel settings with their defaults', () => {
    const out = egressSidecarFiles(reservation({ public_key: PEER, address: '10.9.0.2/32', dns: ['10.9.0.1'] }));
    expect(out?.files.type).toEqual({ content: 'key_pair_tunnel\n', mode: 0o644 });
    expect(out?.files['wg0.conf']).toEqual({
      content: `[Interface]\nPrivateKey = ${KEY}\n\n[Peer]\nPublicKey = ${PEER}\nEndpoint = vpn.example.com:51820\nAllowedIPs = 0.0.0.0/0\nPersistentKeepalive = 25\n`,
      mode: 0o600,
    });
    expect(out?.files['tunnel.env'].content).toBe('ENDPOINT=vpn.example.com:51820\nPROTO=udp\nDEV=wg0\nADDRESS=10.9.0.2/32\nALLOWED_IPS=0.0.0.0/0\nDNS=10.9.0.1\nMTU=1420\n');
    expect(out?.files['tunnel.env'].content).not.toContain(KEY);
  });

  it('is null for a provider type that has no sidecar', () => {
    expect(egressSidecarFiles(reservation({}, { type: 'carrier_pigeon' }))).toBeNull();
  });

  it('refuses what cannot make a tunnel (or could inject lines), naming the gateway', () => {
    const bad = (config: unknown, fields = {}) => () => egressSidecarFiles(reservation(config, fields));
    expect(bad({ address: '10.9.0.2/32' })).toThrow(new EgressConfigError('bad configuration of the egress gateway exit-1: config.public_key must be the gateway\'s WireGuard public key'));
    expect(bad({ public_key: PEER })).toThrow(/exit-1: config.address is required/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32\nPostUp = sh' })).toThrow(/config.address must be CIDR addresses/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32' }, { key: 'not-a-key' })).toThrow(/vpn_private_key is not a WireGuard key/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32' }, { endpoint: 'vpn.example.com' })).toThrow(/endpoint must be host:port/);
    expect(bad({ public_key: PEER, address: '10.9.0.2/32', mtu: 'big' })).toThrow(/config.mtu/);
    expect(bad(['not', 'an', 'object'])).toThrow(/exit-1: config must be an object/);
  });
});

describe('egressSidecarFiles (username_password_vpn)', () => {
  const vpn = (config: unknown, fields: Fields = {}) =>
    egressSidecarFiles(reservation(config, { type: 'username_password_vpn', endpoint: 'vpn.example.com:1194', username: 'alice', password: 's3cret pass', ...fields }));

  it('writes the OpenVPN client config from checked values, the CA, and the username/password in a 0600 file', () => {
    const out = vpn({ ca: `${CA}\r\n`, proto: 'tcp', verify_x509_name: 'vpn-server', data_ciphers: 'AES-256-GCM:AES-128-GCM', tls_crypt: TLS, dns: '10.8.0.1' });
    expect(out?.files.type.content).toBe('username_password_vpn\n');
    expect(out?.files['openvpn.auth']).toEqual({ content: 'alice\ns3cret pass\n', mode: 0o600 });
    expect(out?.files['openvpn-ca.pem']).toEqual({ content: `${CA}\n`, mode: 0o644 });
    expect(out?.files['openvpn-tls.key']).toEqual({ content: `${TLS}\n`, mode: 0o600 });
    const conf = out?.files['openvpn.conf'].content ?? '';
    expect(conf.split('\n')).toEqual(expect.arrayContaining([
      'client', 'proto tcp-client', 'ca /etc/egress/openvpn-ca.pem', 'remote-cert-tls server', 'verify-x509-name vpn-server name',
      'auth-user-pass /etc/egress/openvpn.auth', 'auth-retry none', 'data-ciphers AES-256-GCM:AES-128-GCM',
      'tls-crypt /etc/egress/openvpn-tls.key', 'redirect-gateway def1',
    ]));
    expect(conf).not.toMatch(/remote |script|\bup\b/);
    expect(out?.files['tunnel.env'].content).toBe('ENDPOINT=vpn.example.com:1194\nPROTO=tcp\nDEV=tun0\nDNS=10.8.0.1\n');
    for (const f of ['openvpn.conf', 'openvpn-ca.pem', 'tunnel.env', 'type']) expect(out?.files[f].content).not.toContain('s3cret');
  });

  it('defaults to UDP with everything through the tunnel; redirect_gateway false keeps the server\'s routes only', () => {
    expect(vpn({ ca: CA })?.files['openvpn.conf'].content).toMatch(/^proto udp$[\s\S]*^redirect-gateway def1$/m);
    expect(vpn({ ca: CA, redirect_gateway: false })?.files['openvpn.conf'].content).not.toContain('redirect-gateway');
    expect(vpn({ ca: CA })?.files).not.toHaveProperty(['openvpn-tls.key']);
  });

  it('refuses a config or credential that cannot make a tunnel (or could inject a directive), naming the gateway', () => {
    const bad = (config: unknown, fields: Fields = {}) => () => vpn(config, fields);
    expect(bad({})).toThrow(new EgressConfigError('bad configuration of the egress gateway exit-1: config.ca is required (the server\'s CA certificate, PEM)'));
    expect(bad({ ca: 'hello' })).toThrow(/exit-1: config.ca must be the server's CA certificate/);
    expect(bad({ ca: `${CA}\nup /bin/sh` })).toThrow(/config.ca must be/);
    expect(bad({ ca: CA, proto: 'icmp' })).toThrow(/config.proto must be one of udp, tcp/);
    expect(bad({ ca: CA, verify_x509_name: 'a b\nscript-security 3' })).toThrow(/config.verify_x509_name/);
    expect(bad({ ca: CA, data_ciphers: 'AES-256-GCM\nup /bin/sh' })).toThrow(/config.data_ciphers/);
    expect(bad({ ca: CA, tls_crypt: TLS, tls_auth: TLS })).toThrow(/exclude each other/);
    expect(bad({ ca: CA, redirect_gateway: 'yes' })).toThrow(/config.redirect_gateway/);
    expect(bad({ ca: CA }, { endpoint: 'vpn.example.com' })).toThrow(/endpoint must be host:port/);
    expect(bad({ ca: CA }, { password: 'two\nlines' })).toThrow(/exit-1: the credential needs a username and a password of one line each/);
    expect(bad({ ca: CA }, { username: null })).toThrow(/needs a username and a password/);
  });
});

describe('egressSidecarFiles (mesh_network)', () => {
  const NCA = '-----BEGIN NEBULA CERTIFICATE-----\nCjMKAW0owZGo2AYwwfis5wY6IPVqi0t+oxphe0DsjHLd4AMQgdaWCDPrxoEZiXpW\n-----END NEBULA CERTIFICATE-----\n';
  const NCERT = '-----BEGIN NEBULA CERTIFICATE-----\nCl4KAW4SCYKAhFCA/v//DyjBkajYBjDA+KznBjogcJzPLgHgc0HXreMBdKIi9DSN\n-----END NEBULA CERTIFICATE-----\n';
  const NKEY = '-----BEGIN NEBULA X25519 PRIVATE KEY-----\n6XZWDs3EdmBhzGfnJfCCXGcy0+9CoATAHCcXYccSTLg=\n-----END NEBULA X25519 PRIVATE KEY-----\n';
  const mesh = (config: unknown, fields: Fields = {}) =>
    egressSidecarFiles(reservation(config, { type: 'mesh_network', endpoint: 'lighthouse.example.com:4242', key: null, mesh: NCERT + NKEY, ...fields }));

  it('writes the Nebula config (the gateway node as lighthouse and exit), the CA, the certificate and the key (0600)', () => {
    const out = mesh({ ca: NCA, exit_node: '10.97.0.1', dns: ['10.97.0.1'] });
    expect(out?.files['nebula-host.key']).toEqual({ content: NKEY, mode: 0o600 });
    expect(out?.files['nebula-host.crt']).toEqual({ content: NCERT, mode: 0o644 });
    expect(out?.files['nebula-ca.crt']).toEqual({ content: NCA, mode: 0o644 });
    const yml = JSON.parse(out?.files['nebula.yml'].content ?? '');
    expect(yml.static_host_map).toEqual({ '10.97.0.1': ['lighthouse.example.com:4242'] });
    expect(yml.lighthouse.hosts).toEqual(['10.97.0.1']);
    expect(yml.tun.unsafe_routes).toEqual([{ route: '0.0.0.0/1', via: '10.97.0.1' }, { route: '128.0.0.0/1', via: '10.97.0.1' }]);
    expect(yml.pki.key).toBe('/etc/egress/nebula-host.key');
    expect(out?.files['tunnel.env'].content).toBe('ENDPOINT=lighthouse.example.com:4242\nPROTO=udp\nDEV=nebula1\nDNS=10.97.0.1\nEXIT_NODE=10.97.0.1\n');
    for (const f of ['nebula.yml', 'nebula-host.crt', 'tunnel.env']) expect(out?.files[f].content).not.toContain('6XZWDs3E');
    // The certificate may come with the gateway's config instead of the credential.
    expect(mesh({ ca: NCA, exit_node: '10.97.0.1', cert: NCERT }, { mesh: NKEY })?.files['nebula-host.crt'].content).toBe(NCERT);
  });

  it('refuses key material, certificates or addresses that cannot make a tunnel (or carry anything else), naming the gateway', () => {
    const bad = (config: unknown, fields: Fields = {}) => () => mesh(config, fields);
    const ok = { ca: NCA, exit_node: '10.97.0.1' };
    expect(bad(ok, { mesh: 'hunter2' })).toThrow(/exit-1: the credential's mesh_key must be a Nebula private key/);
    expect(bad(ok, { mesh: `${NCERT}${NKEY}extra: line` })).toThrow(/mesh_key must be a Nebula private key/);
    expect(bad(ok, { mesh: NKEY })).toThrow(/the node's Nebula certificate \(PEM\) must be in the credential's mesh_key or config.cert/);
    expect(bad({ exit_node: '10.97.0.1' })).toThrow(/config.ca must be the mesh's Nebula CA certificate/);
    expect(bad({ ca: `${NCA}pki: {}` , exit_node: '10.97.0.1' })).toThrow(/config.ca must be/);
    expect(bad({ ca: NCA })).toThrow(/config.exit_node must be the gateway node's mesh address/);
    expect(bad({ ...ok, exit_node: '10.97.0.1\nx' })).toThrow(/config.exit_node/);
    expect(bad(ok, { endpoint: 'lighthouse' })).toThrow(/endpoint must be host:port/);
  });
});

describe('egressSidecarFiles (custom)', () => {
  const custom = (config: unknown, fields: Fields = {}) =>
    egressSidecarFiles(reservation(config, { type: 'custom', endpoint: 'gw.example.com:443', key: null, custom: 'opaque "token"', ...fields }));

  it('writes the command (NUL-separated) and the credential as one JSON line in a 0600 file', () => {
    const out = custom({ command: ['/usr/bin/sh', '-c', 'cat > /run/x; ip link add $EGRESS_DEV type dummy'], interface: 'egr0', proto: 'tcp' });
    expect(out?.files.command).toEqual({ content: '/usr/bin/sh\0-c\0cat > /run/x; ip link add $EGRESS_DEV type dummy\0', mode: 0o644 });
    expect(out?.files.credential).toEqual({ content: '{"custom_credential":"opaque \\"token\\""}\n', mode: 0o600 });
    expect(out?.files['tunnel.env'].content).toBe('ENDPOINT=gw.example.com:443\nPROTO=tcp\nDEV=egr0\nDNS=\n');
    expect(custom({ command: '/usr/local/bin/tunnel' }, { username: 'bob' })?.files.credential.content).toBe('{"username":"bob","custom_credential":"opaque \\"token\\""}\n');
    expect(custom({ command: '/usr/local/bin/tunnel' })?.files['tunnel.env'].content).toContain('DEV=tun0\n');
  });

  it('refuses a command that is not an absolute path with string arguments, naming the gateway', () => {
    const bad = (config: unknown) => () => custom(config);
    expect(bad({})).toThrow(/exit-1: config.command must name a program of the sidecar image/);
    expect(bad({ command: [] })).toThrow(/config.command must name/);
    expect(bad({ command: ['sh', '-c', 'true'] })).toThrow(/absolute path/);
    expect(bad({ command: ['/bin/true', 3] })).toThrow(/config.command must name/);
    expect(bad({ command: '/bin/true', interface: 'tun0; reboot' })).toThrow(/config.interface/);
  });

  it('the NUL-separated command reads back intact in bash (mapfile -d "")', () => {
    const content = custom({ command: ['/usr/bin/printf', '%s|', 'a b', '$HOME', "it's"] })?.files.command.content ?? '';
    const out = execFileSync('bash', ['-c', 'mapfile -d "" -t cmd; "${cmd[@]}"'], { input: content }).toString();
    expect(out).toBe("a b|$HOME|it's|");
  });
});

describe('egressEnvironment', () => {
  it('keeps every secret out of the workspace container\'s environment for the types that run in a sidecar', () => {
    for (const type of ['key_pair_tunnel', 'username_password_vpn', 'mesh_network', 'custom']) {
      const env = egressEnvironment(reservation({ public_key: PEER }, { type, username: 'alice', password: 'pw', custom: 'c', mesh: 'm' }) as never);
      expect(env.EGRESS_PROVIDER_TYPE).toBe(type);
      for (const secret of SECRETS) expect(env).not.toHaveProperty(secret);
    }
  });
});
