/**
 * What an egress sidecar needs, as files the worker writes into it through the Docker archive API before it starts
 * (never its environment or labels): /etc/egress/<name>. The sidecar's entrypoint (images/egress/rootfs/usr/local/
 * bin/egress-sidecar, one script per provider under /usr/local/lib/egress/) reads them. Every type writes `type` and
 * `tunnel.env` (not secret, KEY=value: ENDPOINT, PROTO, DEV and the type's own); the secret goes in a 0600 file.
 * Shapes in docs/decisions/egress.md, "Egress for real (issue 21)".
 */
import { EgressConfigError, EgressSidecarFiles, EgressSidecarInput } from './egress-sidecar-common';
import { customFiles } from './egress-sidecar-custom';
import { nebulaFiles } from './egress-sidecar-nebula';
import { openvpnFiles } from './egress-sidecar-openvpn';
import { wireguardFiles } from './egress-sidecar-wireguard';

export { EgressConfigError };
export type { EgressSidecarFiles };

const BUILDERS: Record<string, (input: EgressSidecarInput) => EgressSidecarFiles> = {
  key_pair_tunnel: wireguardFiles,
  username_password_vpn: openvpnFiles,
  mesh_network: nebulaFiles,
  custom: customFiles,
};

/** Provider types that run in a sidecar; the others keep the container's EGRESS_* variables (issue 12). */
export const SIDECAR_PROVIDER_TYPES: readonly string[] = Object.keys(BUILDERS);

/** The sidecar files of a reservation whose provider runs in a sidecar, else null; EgressConfigError names the gateway. */
export function egressSidecarFiles(reservation: EgressSidecarInput): EgressSidecarFiles | null {
  const build = BUILDERS[reservation.provider.type];
  if (!build) return null;
  const { files } = build(reservation);
  return { files: { type: { content: `${reservation.provider.type}\n`, mode: 0o644 }, ...files } };
}
