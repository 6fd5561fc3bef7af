import type { EntityManager } from 'typeorm';
import type { AppConfig } from '@ws/common';
import type { ServerImagesService } from '@ws/images';
import { Workspace } from '@ws/workspaces';
import type { IssuedLaunch, WorkspaceServerConnection } from '@ws/workspaces';
import { ServerConnectionStep } from './server-connection.step';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';

const sessions = new WorkspaceServerSessions({
  SERVER_CREDENTIALS_KEY: 'unit-step-key-0123456789abcdef0123', SERVER_BRIDGE_IMAGE: 'desktop:1', RDP_CLIENT_CREDENTIAL_TTL_SECONDS: 300,
  SERVER_TARGETS_ALLOW_PRIVATE: true, SERVER_TARGETS_ALLOW: '',
} as AppConfig, {} as ServerImagesService);
const step = new ServerConnectionStep(sessions);

const connection = (mode: WorkspaceServerConnection['mode']): WorkspaceServerConnection => ({
  protocol: 'rdp', host: '10.0.0.7', port: 3389, username: 'tester', domain: '', rdpClientType: mode === 'relay' ? 'RDP_CLIENT' : 'GUAC', mode,
});
const launch = (workspaceId = '0123456789abcdef0123456789abcdef') => ({ workspaceId }) as unknown as IssuedLaunch;

describe('ServerConnectionStep.reserve', () => {
  it('seals the password to the id minted for the record: only that workspace opens it', async () => {
    const reserved = await step.reserve({} as EntityManager, launch(), { connection: connection('bridge'), password: 'server-pw' });
    const row = Object.assign(new Workspace(), { id: '0123456789abcdef0123456789abcdef', ...reserved.serverSession });
    expect(row.serverConnection).toEqual(connection('bridge'));
    expect(row.serverPasswordEncrypted).not.toContain('server-pw');
    expect(sessions.passwordOf(row)).toBe('server-pw');
    expect(() => sessions.passwordOf(Object.assign(new Workspace(), { ...row, id: 'fedcba9876543210fedcba9876543210' }))).toThrow();
    expect(row.relaySecret).toBeNull();
  });

  it('gives a relay its own key, and a container workspace nothing', async () => {
    const relay = await step.reserve({} as EntityManager, launch(), { connection: connection('relay'), password: 'pw' });
    expect(relay.serverSession?.relaySecret).toMatch(/^[0-9a-f]{64}$/);
    expect(await step.reserve({} as EntityManager, launch(), null)).toEqual({});
  });
});
