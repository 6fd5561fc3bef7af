import { toWireId } from '@ws/common';
import type { EgressGateway, EgressProvider } from './egress.entities';
import type { EgressCredentialView } from './egress-views';

/** Secrets are answered as a fixed run of asterisks (their length is not told); null stays null. */
export const SECRET_MASK = '********';
export const maskSecret = (secret: string | null): string | null => (secret === null ? null : SECRET_MASK);

export function toEgressProviderResponse(p: EgressProvider) {
  return { egress_provider_id: toWireId(p.id), name: p.name, egress_provider_type: p.type };
}

export function toEgressGatewayReference(g: EgressGateway) {
  return { name: g.name, egress_gateway_id: toWireId(g.id) };
}

/**
 * The spec's Egress credential, typed as its field table types it: `username` and `password` strings (`""` when
 * unset, the password masked when set), `active_connection_limit` an integer (0 when no limit is stored), the other
 * secrets string or null. `showSecrets` (the operator CLI's --show-secrets only, with a view from
 * EgressCredentials.reveal) answers them in clear.
 */
export function toEgressCredentialResponse(view: EgressCredentialView, options: { showSecrets?: boolean } = {}) {
  const { credential: c } = view;
  const secret = options.showSecrets ? (s: string | null) => s : maskSecret;
  return {
    egress_credential_id: toWireId(c.id),
    name: c.name,
    username: c.username ?? '',
    password: secret(c.password) ?? '',
    enabled: c.enabled,
    user_id: toWireId(c.userId),
    group_id: toWireId(c.groupId),
    image_id: toWireId(c.imageId),
    egress_provider_id: toWireId(c.providerId),
    allow_all_gateways: c.allowAllGateways,
    vpn_private_key: secret(c.vpnPrivateKey),
    mesh_key: secret(c.meshKey),
    custom_credential: secret(c.customCredential),
    limit_active_connections: c.limitActiveConnections,
    active_connection_limit: c.activeConnectionLimit ?? 0,
    active_connections: view.activeConnections,
    egress_provider: toEgressProviderResponse(view.provider),
    egress_gateways: view.gateways.map(toEgressGatewayReference),
  };
}
