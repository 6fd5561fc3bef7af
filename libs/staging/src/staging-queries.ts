import type { EffectiveGroupSettings } from '@ws/groups';
import type { Image } from '@ws/images';
import type { LaunchRequest } from '@ws/workspaces';
import { STAGING_FLAG_NAMES } from './staging-config.entity';

/**
 * Whether a request can take an already-started container: not when it brings environment variables or an
 * egress gateway (the container's environment is fixed at its start) or asks to use or reset a persistent
 * profile (it is loaded before the desktop starts).
 */
export function canServeFromStaging(
  image: Pick<Image, 'persistentProfilePath'>,
  request: Pick<LaunchRequest, 'environment' | 'persistentProfileMode' | 'egressGatewayId'>,
): boolean {
  if (Object.keys(request.environment).length > 0) return false;
  if (request.egressGatewayId) return false;
  if (image.persistentProfilePath && (request.persistentProfileMode === 'Enabled' || request.persistentProfileMode === 'Reset')) return false;
  return true;
}

/**
 * An image whose volume_mappings name the user ({username}, {user_id}) cannot be staged: a staged workspace's
 * container starts before it has a user.
 */
export function mountsPerUser(image: Pick<Image, 'volumeMappings'>): boolean {
  return /\{(username|user_id)\}/.test(JSON.stringify(image.volumeMappings ?? {}));
}

/**
 * This image's staging configs whose flags equal the user's effective client settings: the pools a claim may
 * take from (the workspaces library picks the workspace: pickReadyStaged).
 */
export const MATCHING_CONFIGS_SQL = `
  SELECT c.id FROM staging_configs c
   WHERE c.image_id = $1 AND ${STAGING_FLAG_NAMES.map((name, i) => `c.${name} = $${2 + i}`).join(' AND ')}`;

export function pickParameters(imageId: string, settings: EffectiveGroupSettings): unknown[] {
  return [imageId, ...STAGING_FLAG_NAMES.map((name) => settings.clientSettings[name])];
}
