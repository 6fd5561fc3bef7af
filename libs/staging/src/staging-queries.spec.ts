import { DEFAULT_CLIENT_SETTINGS, EffectiveGroupSettings } from '@ws/groups';
import { canServeFromStaging, MATCHING_CONFIGS_SQL, mountsPerUser, pickParameters } from './staging-queries';
import { STAGING_FLAG_NAMES } from './staging-config.entity';

describe('staging claim rules', () => {
  const plain = { persistentProfilePath: null };
  const profiled = { persistentProfilePath: '/profiles/{username}' };
  const asked = (fields: { environment?: Record<string, string>; persistentProfileMode?: 'Enabled' | 'Disabled' | 'Reset'; egressGatewayId?: string }) => ({ environment: {}, ...fields });

  it('serves plain requests, and profile images unless a profile is used or reset', () => {
    expect(canServeFromStaging(plain, asked({}))).toBe(true);
    expect(canServeFromStaging(plain, { environment: {} })).toBe(true);
    expect(canServeFromStaging(plain, asked({ persistentProfileMode: 'Enabled' }))).toBe(true); // no profile path: the mode does nothing
    expect(canServeFromStaging(profiled, asked({ persistentProfileMode: 'Disabled' }))).toBe(true);
    expect(canServeFromStaging(profiled, asked({}))).toBe(true);
  });

  it('starts a fresh workspace for environment variables, an egress gateway or a used or reset profile', () => {
    expect(canServeFromStaging(plain, { environment: { A: '1' } })).toBe(false);
    expect(canServeFromStaging(plain, asked({ egressGatewayId: 'a'.repeat(32) }))).toBe(false);
    expect(canServeFromStaging(profiled, asked({ persistentProfileMode: 'Enabled' }))).toBe(false);
    expect(canServeFromStaging(profiled, asked({ persistentProfileMode: 'Reset' }))).toBe(false);
  });

  it('matches every flag of the config against the user effective client settings, in order', () => {
    const clientSettings = { ...DEFAULT_CLIENT_SETTINGS, allow_workspace_audio: false, allow_workspace_microphone: true };
    const settings = { keepaliveExpiration: 60, usageLimit: null, defaultImageId: null, clientSettings } as EffectiveGroupSettings;
    const params = pickParameters('image-id', settings);
    expect(params).toEqual(['image-id', ...STAGING_FLAG_NAMES.map((name) => clientSettings[name])]);
    for (const [i, name] of STAGING_FLAG_NAMES.entries()) expect(MATCHING_CONFIGS_SQL).toContain(`c.${name} = $${i + 2}`);
    expect(MATCHING_CONFIGS_SQL).toContain('c.image_id = $1');
  });

  it('knows an image whose mounts name the user cannot be staged', () => {
    expect(mountsPerUser({ volumeMappings: {} })).toBe(false);
    expect(mountsPerUser({ volumeMappings: { '/srv/{image_id}': { bind: '/data', mode: 'ro' } } })).toBe(false);
    expect(mountsPerUser({ volumeMappings: { '/srv/homes/{user_id}': { bind: '/data', mode: 'rw' } } })).toBe(true);
    expect(mountsPerUser({ volumeMappings: { 'home-{username}': { bind: '/data', mode: 'rw' } } })).toBe(true);
  });
});
