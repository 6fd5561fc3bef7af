import { foreignNetworkReason, isolatedBridgeOf, WORKSPACE_NETWORK, workspaceNetworkCreateOptions } from './workspace-network';

describe('workspace network', () => {
  const ours = () => {
    const options = workspaceNetworkCreateOptions();
    return { Id: 'n1', Name: options.Name, Driver: options.Driver, Options: { ...options.Options }, Labels: { ...options.Labels } };
  };

  it('is created as a labelled bridge with a fixed interface name and inter-container traffic off', () => {
    expect(workspaceNetworkCreateOptions()).toEqual({
      Name: 'workspace-server-isolated',
      Driver: 'bridge',
      CheckDuplicate: true,
      Internal: false,
      EnableIPv6: false,
      Attachable: false,
      Options: { 'com.docker.network.bridge.name': 'ws-isolated', 'com.docker.network.bridge.enable_icc': 'false' },
      Labels: { 'workspace-server.network': 'workspace-isolation' },
    });
    // Linux interface names are at most 15 characters; scripts/workspace-firewall.sh matches this one.
    expect(WORKSPACE_NETWORK.bridge.length).toBeLessThanOrEqual(15);
  });

  it('adopts a network it would have created itself', () => {
    expect(foreignNetworkReason(ours())).toBeNull();
  });

  it('refuses a look-alike of the same name', () => {
    expect(foreignNetworkReason({ ...ours(), Driver: 'overlay' })).toMatch(/driver is overlay/);
    expect(foreignNetworkReason({ ...ours(), Options: { 'com.docker.network.bridge.enable_icc': 'false' } })).toMatch(/bridge is not ws-isolated/);
    expect(foreignNetworkReason({ ...ours(), Options: { 'com.docker.network.bridge.name': 'ws-isolated' } })).toMatch(/inter-container traffic is enabled/);
    expect(foreignNetworkReason({ ...ours(), Labels: null })).toMatch(/lacks the label/);
  });

  it('names the bridge after the engine label workspace-server.isolated-bridge (a second engine on one machine), else ws-isolated', () => {
    expect(isolatedBridgeOf({})).toBe('ws-isolated');
    expect(isolatedBridgeOf({ 'workspace-server.isolated-bridge': 'wse2i1' })).toBe('wse2i1');
    expect(isolatedBridgeOf({ 'workspace-server.isolated-bridge': 'far-too-long-for-linux' })).toBe('ws-isolated');
    expect(workspaceNetworkCreateOptions('wse2i1').Options).toEqual(expect.objectContaining({ 'com.docker.network.bridge.name': 'wse2i1' }));
    expect(foreignNetworkReason({ Id: 'x', Name: 'n', Driver: 'bridge', Options: { 'com.docker.network.bridge.name': 'ws-isolated', 'com.docker.network.bridge.enable_icc': 'false' }, Labels: { 'workspace-server.network': 'workspace-isolation' } }, 'wse2i1')).toMatch(/bridge is not wse2i1/);
  });
});

