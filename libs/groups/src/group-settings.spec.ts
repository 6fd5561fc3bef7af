import type { Group } from './group.entity';
import { DEFAULT_CLIENT_SETTINGS, effectiveSettings, usageWindowStart } from './group-settings';

const group = (over: Partial<Group>): Group => ({
  id: 'g', name: 'g', description: null, systemKey: null, permissions: [], priority: 100, keepaliveExpiration: null, usageLimit: null,
  usageInterval: 'total', defaultImageId: null, recordSessions: null, clientSettings: {}, createdAt: new Date(), ...over,
});

describe('effectiveSettings', () => {
  it('falls back to the deployment default', () => {
    expect(effectiveSettings([], 3600)).toEqual({ keepaliveExpiration: 3600, usageLimit: null, defaultImageId: null, recordSessions: false, clientSettings: DEFAULT_CLIENT_SETTINGS });
  });
  it('the first group (highest priority) that sets a value decides', () => {
    const s = effectiveSettings([group({ keepaliveExpiration: null, defaultImageId: 'img-a' }), group({ keepaliveExpiration: 600, usageLimit: 60, usageInterval: 'daily', defaultImageId: 'img-b' })], 3600);
    expect(s.keepaliveExpiration).toBe(600);
    expect(s.usageLimit).toEqual({ seconds: 60, interval: 'daily' });
    expect(s.defaultImageId).toBe('img-a');
  });
  it('overlays client settings so the first group wins, ignoring unknown keys and wrong types', () => {
    const s = effectiveSettings([group({ clientSettings: { allow_workspace_audio: false } }), group({ clientSettings: { allow_workspace_audio: true, enable_webp: true, bogus: true, idle_disconnect: true } })], 3600);
    expect(s.clientSettings).toEqual({ ...DEFAULT_CLIENT_SETTINGS, allow_workspace_audio: false, enable_webp: true });
  });
});

describe('usageWindowStart', () => {
  const now = new Date('2026-11-19T15:30:00Z'); // a Thursday
  it.each([
    ['daily', '2026-11-19T00:00:00.000Z'],
    ['weekly', '2026-11-16T00:00:00.000Z'],
    ['monthly', '2026-11-01T00:00:00.000Z'],
    ['total', '1970-01-01T00:00:00.000Z'],
  ] as const)('%s', (interval, start) => {
    expect(usageWindowStart(interval, now).toISOString()).toBe(start);
  });
});
