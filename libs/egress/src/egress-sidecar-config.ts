/**
 * What an egress sidecar needs, as files the worker writes into it through the Docker archive API before it starts
 * (never its environment or labels): /etc/egress/<name>. The sidecar's entrypoint (images/egress/rootfs/usr/local/
 * bin/egress-sidecar) reads them. Shapes in docs/decisions/egress.md, "Egress for real (issue 21)".
 */
export interface EgressSidecarFiles {
  /** File name under /etc/egress → content and mode (secrets 0600, root's). */
  files: Record<string, { content: string; mode: number }>;
}

/** A gateway's config that cannot make a tunnel: the launch fails with this message (it names the gateway). */
export class EgressConfigError extends Error {}

/** Provider types that run in a sidecar today; the others keep the container's EGRESS_* variables (issue 12). */
export const SIDECAR_PROVIDER_TYPES: readonly string[] = ['key_pair_tunnel'];

const WG_KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;
const CIDR = /^(?:\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}|[0-9A-Fa-f:]+\/\d{1,3})$/;
const IP = /^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]+)$/;
const ENDPOINT = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):\d{1,5}$/;

/**
 * The sidecar files of a reservation whose provider runs in a sidecar, else null.
 * key_pair_tunnel (WireGuard): the credential's `vpn_private_key`, the gateway's `endpoint` (host:port) and its
 * `config`: `public_key` (the gateway's, required), `address` (this side's tunnel address(es), CIDR, required),
 * `allowed_ips` (default ["0.0.0.0/0"]: everything through the tunnel), `dns` (optional), `persistent_keepalive`
 * (seconds, default 25), `mtu` (default 1420), `preshared_key` (optional). Strings or arrays of strings.
 */
export function egressSidecarFiles(reservation: {
  provider: { type: string };
  gateway: { name: string; endpoint: string; config: unknown };
  credential: { vpnPrivateKey: string | null };
}): EgressSidecarFiles | null {
  const { provider, gateway, credential } = reservation;
  if (!SIDECAR_PROVIDER_TYPES.includes(provider.type)) return null;
  const bad = (why: string) => new EgressConfigError(`bad configuration of the egress gateway ${gateway.name}: ${why}`);
  const config = (gateway.config ?? {}) as Record<string, unknown>;
  const list = (name: string, re: RegExp, fallback?: string[]): string[] => {
    const v = config[name] ?? fallback;
    const items = typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v;
    if (!Array.isArray(items) || items.some((i) => typeof i !== 'string' || !re.test(i))) throw bad(`config.${name} must be ${re === CIDR ? 'CIDR' : 'IP'} addresses`);
    return items as string[];
  };
  const key = credential.vpnPrivateKey ?? '';
  if (!WG_KEY.test(key)) throw bad('the credential\'s vpn_private_key is not a WireGuard key (base64, 32 bytes)');
  const publicKey = config.public_key;
  if (typeof publicKey !== 'string' || !WG_KEY.test(publicKey)) throw bad('config.public_key must be the gateway\'s WireGuard public key');
  const psk = config.preshared_key;
  if (psk !== undefined && (typeof psk !== 'string' || !WG_KEY.test(psk))) throw bad('config.preshared_key must be a WireGuard key');
  if (!ENDPOINT.test(gateway.endpoint ?? '')) throw bad('its endpoint must be host:port');
  const address = list('address', CIDR);
  if (!address.length) throw bad('config.address is required (the tunnel address of this side, CIDR)');
  const allowed = list('allowed_ips', CIDR, ['0.0.0.0/0']);
  const dns = config.dns === undefined ? [] : list('dns', IP);
  const int = (name: string, fallback: number, max: number): number => {
    const v = config[name] ?? fallback;
    if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > max) throw bad(`config.${name} must be an integer up to ${max}`);
    return v as number;
  };
  const keepalive = int('persistent_keepalive', 25, 65535);
  const mtu = int('mtu', 1420, 9000);
  const wg = [
    '[Interface]', `PrivateKey = ${key}`, '',
    '[Peer]', `PublicKey = ${publicKey}`, ...(psk ? [`PresharedKey = ${psk}`] : []),
    `Endpoint = ${gateway.endpoint}`, `AllowedIPs = ${allowed.join(', ')}`, ...(keepalive ? [`PersistentKeepalive = ${keepalive}`] : []),
  ];
  const tunnel = [`ENDPOINT=${gateway.endpoint}`, `ADDRESS=${address.join(',')}`, `ALLOWED_IPS=${allowed.join(',')}`, `DNS=${dns.join(',')}`, `MTU=${mtu}`];
  return {
    files: {
      type: { content: `${provider.type}\n`, mode: 0o644 },
      'wg0.conf': { content: `${wg.join('\n')}\n`, mode: 0o600 },
      'tunnel.env': { content: `${tunnel.join('\n')}\n`, mode: 0o644 },
    },
  };
}
