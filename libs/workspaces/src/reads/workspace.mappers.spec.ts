import { hostUnreachableMessage, serverHealthOf } from './workspace.mappers';

describe('host health in workspace reads', () => {
  const up = { hostname: 'far', health: 'up' as const, healthReason: null, healthCheckedAt: new Date('2026-11-27T23:00:00Z'), downSince: null };
  const down = { ...up, health: 'down' as const, healthReason: 'connect ECONNREFUSED 127.0.0.1:2376', downSince: new Date('2026-11-27T22:59:50Z') };

  it('says nothing while the host is up, or for a workspace without a server', () => {
    expect(hostUnreachableMessage(up)).toBeNull();
    expect(hostUnreachableMessage(null)).toBeNull();
  });

  it('names the host, since when and why it is unreachable, and that the workspace is kept', () => {
    expect(hostUnreachableMessage(down)).toBe(
      "The workspace's host far is unreachable since 2026-11-27 22:59:50.000000 (connect ECONNREFUSED 127.0.0.1:2376); the workspace is kept and is back when its host answers",
    );
  });

  it('answers the health fields in the wire format', () => {
    expect(serverHealthOf(down)).toEqual({ health: 'down', health_reason: 'connect ECONNREFUSED 127.0.0.1:2376', health_checked_at: '2026-11-27 23:00:00.000000', down_since: '2026-11-27 22:59:50.000000' });
    expect(serverHealthOf(up)).toEqual({ health: 'up', health_reason: null, health_checked_at: '2026-11-27 23:00:00.000000', down_since: null });
  });
});
