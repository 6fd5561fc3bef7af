import { configReader, EgressSidecarFiles, EgressSidecarInput, envLines, IP } from './egress-sidecar-common';

const NEBULA_CERT = /-----BEGIN NEBULA CERTIFICATE-----\n[A-Za-z0-9+/=\n]+\n-----END NEBULA CERTIFICATE-----\n?/g;
const NEBULA_KEY = /-----BEGIN NEBULA X25519 PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+\n-----END NEBULA X25519 PRIVATE KEY-----\n?/g;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;

/** The PEM blocks of `text` matching `re` (every other line refused: nothing else may reach a file). */
function blocks(text: string, re: RegExp): string[] | null {
  const normal = `${text.replace(/\r\n/g, '\n').trim()}\n`;
  const found = normal.match(re) ?? [];
  return found.join('').replace(/\n/g, '') === normal.replace(/\n/g, '') ? found.map((b) => `${b.trim()}\n`) : null;
}

/**
 * mesh_network (Nebula 1.6, Debian's `nebula`): the credential's `mesh_key` is the node's key material, its
 * `NEBULA X25519 PRIVATE KEY` PEM, with its `NEBULA CERTIFICATE` (signed by the mesh's CA, holding the node's mesh
 * address) either in the same text or in the gateway's `config.cert`. The gateway's `endpoint` (host:port, UDP) is
 * its node's underlay address; `config`: `ca` (the mesh's CA certificate(s), PEM, required), `exit_node` (the
 * gateway node's mesh address, required: the lighthouse, and the exit for everything, through unsafe routes
 * 0.0.0.0/1 and 128.0.0.0/1; its certificate must hold those subnets), `dns`, `mtu` (default 1300). The YAML
 * config is written as JSON (a subset of YAML) from these checked values only.
 */
export function nebulaFiles(input: EgressSidecarInput): EgressSidecarFiles {
  const { config, bad, int, list, endpoint } = configReader(input);
  const material = input.credential.meshKey ?? '';
  const keyText = material.replace(NEBULA_CERT, '');
  const keys = blocks(keyText, NEBULA_KEY);
  if (!keys || keys.length !== 1) throw bad('the credential\'s mesh_key must be a Nebula private key (PEM), optionally with its certificate');
  const ownCerts = material.match(NEBULA_CERT) ?? [];
  const certText = ownCerts.length ? ownCerts.join('') : typeof config.cert === 'string' ? config.cert : '';
  const certs = certText ? blocks(certText, NEBULA_CERT) : null;
  if (!certs || certs.length !== 1) throw bad('the node\'s Nebula certificate (PEM) must be in the credential\'s mesh_key or config.cert');
  const cas = typeof config.ca === 'string' ? blocks(config.ca, NEBULA_CERT) : null;
  if (!cas?.length) throw bad('config.ca must be the mesh\'s Nebula CA certificate (PEM)');
  const exit = config.exit_node;
  if (typeof exit !== 'string' || !IPV4.test(exit)) throw bad('config.exit_node must be the gateway node\'s mesh address (IPv4)');
  const ep = endpoint();
  const dns = list('dns', IP, 'IP addresses');
  const mtu = int('mtu', 1300, 9000);
  const yml = {
    pki: { ca: '/etc/egress/nebula-ca.crt', cert: '/etc/egress/nebula-host.crt', key: '/etc/egress/nebula-host.key' },
    static_host_map: { [exit]: [ep] },
    lighthouse: { am_lighthouse: false, interval: 60, hosts: [exit] },
    listen: { host: '0.0.0.0', port: 0 },
    punchy: { punch: false },
    tun: {
      disabled: false, dev: 'nebula1', mtu,
      unsafe_routes: [{ route: '0.0.0.0/1', via: exit }, { route: '128.0.0.0/1', via: exit }],
    },
    logging: { level: 'info', format: 'text' },
    firewall: { outbound: [{ port: 'any', proto: 'any', host: 'any' }], inbound: [{ port: 'any', proto: 'icmp', host: exit }] },
  };
  return {
    files: {
      'nebula.yml': { content: `${JSON.stringify(yml, null, 2)}\n`, mode: 0o644 },
      'nebula-ca.crt': { content: cas.join(''), mode: 0o644 },
      'nebula-host.crt': { content: certs[0], mode: 0o644 },
      'nebula-host.key': { content: keys[0], mode: 0o600 },
      'tunnel.env': { content: envLines({ ENDPOINT: ep, PROTO: 'udp', DEV: 'nebula1', DNS: dns.join(','), EXIT_NODE: exit }), mode: 0o644 },
    },
  };
}
