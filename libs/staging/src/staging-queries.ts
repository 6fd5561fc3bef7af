import type { EffectiveGroupSettings } from '@ws/groups';
import type { Image } from '@ws/images';
import { UNASSIGNED_STAGED } from '@ws/workspaces';
import type { RequestWorkspaceRequest } from '@ws/workspaces';
import { STAGING_FLAG_NAMES } from './staging-config.entity';

/**
 * Whether a request can take an already-started container: not when it brings environment variables or an
 * egress gateway (the container's environment is fixed at its start) or asks to use or reset a persistent
 * profile (it is loaded before the desktop starts).
 */
export function canServeFromStaging(
  image: Pick<Image, 'persistentProfilePath'>,
  request: Pick<RequestWorkspaceRequest, 'environment' | 'persistent_profile_mode' | 'egress_gateway_id'>,
): boolean {
  if (request.environment && Object.keys(request.environment).length > 0) return false;
  if (request.egress_gateway_id) return false;
  if (image.persistentProfilePath && (request.persistent_profile_mode === 'Enabled' || request.persistent_profile_mode === 'Reset')) return false;
  return true;
}

/**
 * An image whose volume_mappings name the user ({username}, {user_id}) cannot be staged: a staged workspace's
 * container starts before it has a user.
 */
export function mountsPerUser(image: Pick<Image, 'volumeMappings'>): boolean {
  return /\{(username|user_id)\}/.test(JSON.stringify(image.volumeMappings ?? {}));
}

/** Staged workspaces never handed to anyone that run and have not expired: what a claim can take. */
const READY = `${UNASSIGNED_STAGED} AND w.status = 'running' AND w.expiration_date > now()`;

export const COUNT_READY_SQL = `
  SELECT w.staging_config_id, count(*) AS ready FROM workspaces w
   WHERE w.staging_config_id = ANY($1) AND ${READY} GROUP BY w.staging_config_id`;

/**
 * The oldest ready staged workspace of a config for this image whose flags equal the user's, locked for the
 * claiming transaction; rows another claim holds are skipped (SKIP LOCKED), so concurrent requests on any
 * replica never get the same one and never wait for each other.
 */
export const PICK_STAGED_SQL = `
  SELECT w.id, w.share_id, w.staging_config_id FROM workspaces w JOIN staging_configs c ON c.id = w.staging_config_id
   WHERE ${READY} AND w.image_id = $1 AND c.image_id = $1
     AND ${STAGING_FLAG_NAMES.map((name, i) => `c.${name} = $${2 + i}`).join(' AND ')}
   ORDER BY w.start_date, w.id LIMIT 1 FOR UPDATE OF w SKIP LOCKED`;

export function pickParameters(imageId: string, settings: EffectiveGroupSettings): unknown[] {
  return [imageId, ...STAGING_FLAG_NAMES.map((name) => settings.clientSettings[name])];
}
