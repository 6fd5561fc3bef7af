import { CIDR, configReader, EgressSidecarFiles, EgressSidecarInput, envLines, IP } from './egress-sidecar-common';

const WG_KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

/**
 * key_pair_tunnel (WireGuard): the credential's `vpn_private_key`, the gateway's `endpoint` (host:port) and its
 * `config`: `public_key` (the gateway's, required), `address` (this side's tunnel address(es), CIDR, required),
 * `allowed_ips` (default ["0.0.0.0/0"]: everything through the tunnel), `dns` (optional), `persistent_keepalive`
 * (seconds, default 25), `mtu` (default 1420), `preshared_key` (optional). Strings or arrays of strings.
 */
export function wireguardFiles(input: EgressSidecarInput): EgressSidecarFiles {
  const { config, bad, list, int, endpoint } = configReader(input);
  const key = input.credential.vpnPrivateKey ?? '';
  if (!WG_KEY.test(key)) throw bad('the credential\'s vpn_private_key is not a WireGuard key (base64, 32 bytes)');
  const publicKey = config.public_key;
  if (typeof publicKey !== 'string' || !WG_KEY.test(publicKey)) throw bad('config.public_key must be the gateway\'s WireGuard public key');
  const psk = config.preshared_key;
  if (psk !== undefined && (typeof psk !== 'string' || !WG_KEY.test(psk))) throw bad('config.preshared_key must be a WireGuard key');
  const ep = endpoint();
  const address = list('address', CIDR, 'CIDR addresses');
  if (!address.length) throw bad('config.address is required (the tunnel address of this side, CIDR)');
  const allowed = list('allowed_ips', CIDR, 'CIDR addresses', ['0.0.0.0/0']);
  const dns = list('dns', IP, 'IP addresses');
  const keepalive = int('persistent_keepalive', 25, 65535);
  const mtu = int('mtu', 1420, 9000);
  const wg = [
    '[Interface]', `PrivateKey = ${key}`, '',
    '[Peer]', `PublicKey = ${publicKey}`, ...(psk ? [`PresharedKey = ${psk}`] : []),
    `Endpoint = ${ep}`, `AllowedIPs = ${allowed.join(', ')}`, ...(keepalive ? [`PersistentKeepalive = ${keepalive}`] : []),
  ];
  return {
    files: {
      'wg0.conf': { content: `${wg.join('\n')}\n`, mode: 0o600 },
      'tunnel.env': { content: envLines({ ENDPOINT: ep, PROTO: 'udp', DEV: 'wg0', ADDRESS: address.join(','), ALLOWED_IPS: allowed.join(','), DNS: dns.join(','), MTU: mtu }), mode: 0o644 },
    },
  };
}
