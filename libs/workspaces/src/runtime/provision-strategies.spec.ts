import { PermanentFailure } from '@ws/queue';
import { Workspace, WorkspaceServerConnection } from '../workspace.entity';
import { strategyFor } from './provision-strategies';
import type { ProvisionStrategy } from './provision-strategy';

const strategy = (name: string, handles: (w: Workspace) => boolean): ProvisionStrategy =>
  ({ name, onDockerHost: true, handles, isPermanent: () => true, provision: async () => undefined });
const workspace = (mode: WorkspaceServerConnection['mode'] | null) =>
  Object.assign(new Workspace(), { id: '0123456789abcdef0123456789abcdef', serverConnection: mode ? ({ mode } as WorkspaceServerConnection) : null });

const container = strategy('container', (w) => !w.serverConnection);
const bridge = strategy('bridge', (w) => !!w.serverConnection && w.serverConnection.mode !== 'direct');
const direct = strategy('direct VNC', (w) => w.serverConnection?.mode === 'direct');

describe('provision strategies', () => {
  it('pick the one strategy that handles the workspace', () => {
    const all = [bridge, direct, container];
    expect(strategyFor(all, workspace(null)).name).toBe('container');
    expect(strategyFor(all, workspace('bridge')).name).toBe('bridge');
    expect(strategyFor(all, workspace('relay')).name).toBe('bridge');
    expect(strategyFor(all, workspace('direct')).name).toBe('direct VNC');
  });

  it('fail the workspace for good when no module or two modules handle it', () => {
    expect(() => strategyFor([container], workspace('relay'))).toThrow(PermanentFailure);
    expect(() => strategyFor([container], workspace('relay'))).toThrow('no provision strategy handles workspace 0123456789abcdef0123456789abcdef (a relay server session)');
    expect(() => strategyFor([container, strategy('other', () => true)], workspace(null))).toThrow('provision strategies container, other all handle');
  });
});
