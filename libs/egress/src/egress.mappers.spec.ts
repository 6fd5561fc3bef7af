import { egressEnvironment } from './egress-connections.service';
import { EgressCredential, EgressGateway, EgressProvider } from './egress.entities';
import { SECRET_MASK, toEgressCredentialResponse } from './egress.mappers';

const provider = Object.assign(new EgressProvider(), { id: '00000000-0000-4000-8000-000000000001', name: 'wg', type: 'key_pair_tunnel' as const });
const gateway = Object.assign(new EgressGateway(), {
  id: '00000000-0000-4000-8000-000000000002', providerId: provider.id, name: 'gw', endpoint: '203.0.113.7:51820', config: { peer_public_key: 'abc=' },
});
const credential = Object.assign(new EgressCredential(), {
  id: '00000000-0000-4000-8000-000000000003', name: 'c', providerId: provider.id, enabled: true, username: null, password: null, vpnPrivateKey: 'private',
  meshKey: null, customCredential: 'opaque', userId: null, groupId: null, imageId: '00000000-0000-4000-8000-000000000004', allowAllGateways: true,
  limitActiveConnections: false, activeConnectionLimit: null,
});

describe('egress mappers', () => {
  it('masks every set secret with a fixed run of asterisks and keeps null as null', () => {
    const body = toEgressCredentialResponse({ credential, provider, gateways: [gateway], activeConnections: 2 });
    expect(body).toEqual(expect.objectContaining({
      egress_credential_id: '00000000000040008000000000000003', username: '', password: '', vpn_private_key: SECRET_MASK, mesh_key: null, custom_credential: SECRET_MASK,
      active_connection_limit: 0,
      image_id: '00000000000040008000000000000004', user_id: null, active_connections: 2,
      egress_provider: { egress_provider_id: '00000000000040008000000000000001', name: 'wg', egress_provider_type: 'key_pair_tunnel' },
      egress_gateways: [{ name: 'gw', egress_gateway_id: '00000000000040008000000000000002' }],
    }));
    expect(JSON.stringify(body)).not.toMatch(/"private"|"opaque"/);
    expect(toEgressCredentialResponse({ credential, provider, gateways: [], activeConnections: 0 }, { showSecrets: true }).vpn_private_key).toBe('private');
  });

  it('types username and password as strings and the limit as an integer, as the contract\'s field table does', () => {
    const set = { ...credential, username: 'ann', password: 'hunter2', limitActiveConnections: true, activeConnectionLimit: 3 } as EgressCredential;
    const body = toEgressCredentialResponse({ credential: set, provider, gateways: [], activeConnections: 1 });
    expect(body).toEqual(expect.objectContaining({ username: 'ann', password: SECRET_MASK, limit_active_connections: true, active_connection_limit: 3, active_connections: 1 }));
  });

  it('gives the container the provider and the gateway, never a secret (every type runs in a sidecar)', () => {
    const common = {
      EGRESS_PROVIDER_NAME: 'wg', EGRESS_GATEWAY_ID: '00000000000040008000000000000002', EGRESS_GATEWAY_NAME: 'gw',
      EGRESS_GATEWAY_ENDPOINT: '203.0.113.7:51820', EGRESS_GATEWAY_CONFIG: '{"peer_public_key":"abc="}',
    };
    // Every provider type runs in a sidecar: the secrets reach it only (issue 21).
    expect(egressEnvironment({ credential, gateway, provider })).toEqual({ EGRESS_PROVIDER_TYPE: 'key_pair_tunnel', ...common });
    expect(egressEnvironment({ credential, gateway, provider: { ...provider, type: 'custom' } as typeof provider })).toEqual({ EGRESS_PROVIDER_TYPE: 'custom', ...common });
    expect(egressEnvironment({ credential, gateway, provider: { ...provider, type: 'mesh_network' } as typeof provider })).toEqual({ EGRESS_PROVIDER_TYPE: 'mesh_network', ...common });
  });
});
