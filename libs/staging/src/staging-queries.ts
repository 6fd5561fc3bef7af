import type { EffectiveGroupSettings } from '@ws/groups/group-settings';
import type { Image } from '@ws/images/image.entity';
import type { RequestWorkspaceRequest } from '@ws/workspaces';
import { STAGING_FLAG_NAMES } from './staging-config.entity';

/**
 * Whether a request can take an already-started container: not when it brings environment variables (the
 * container's environment is fixed at its start) or asks to use or reset a persistent profile (it is loaded
 * before the desktop starts).
 */
export function canServeFromStaging(image: Pick<Image, 'persistentProfilePath'>, request: Pick<RequestWorkspaceRequest, 'environment' | 'persistent_profile_mode'>): boolean {
  if (request.environment && Object.keys(request.environment).length > 0) return false;
  if (image.persistentProfilePath && (request.persistent_profile_mode === 'Enabled' || request.persistent_profile_mode === 'Reset')) return false;
  return true;
}

/** Unassigned staged workspaces that run and have not expired: what a claim can take. */
const READY = `w.staging_config_id IS NOT NULL AND w.user_id IS NULL AND w.status = 'running' AND w.expiration_date > now()`;

export const COUNT_READY_SQL = `
  SELECT w.staging_config_id, count(*) AS ready FROM workspaces w
   WHERE w.staging_config_id = ANY($1) AND ${READY} GROUP BY w.staging_config_id`;

/**
 * One statement: pick the oldest ready staged workspace of a config for this image whose flags equal the
 * user's, skipping rows another transaction holds, and make it the user's. The outer conditions repeat the
 * pick's, so a row changed between the pick and the update is not taken. Usage and expiry start now.
 */
export const CLAIM_STAGED_SQL = `
  UPDATE workspaces SET user_id = $1, sharing_enabled = $3, start_date = now(), keepalive_date = now(),
         expiration_date = now() + make_interval(secs => $4), launch_options = launch_options || $5::jsonb,
         operational_message = 'Assigned', updated_at = now()
   WHERE id = (
     SELECT w.id FROM workspaces w JOIN staging_configs c ON c.id = w.staging_config_id
      WHERE ${READY} AND w.image_id = $2 AND c.image_id = $2
        AND ${STAGING_FLAG_NAMES.map((name, i) => `c.${name} = $${6 + i}`).join(' AND ')}
      ORDER BY w.start_date, w.id LIMIT 1 FOR UPDATE OF w SKIP LOCKED)
     AND user_id IS NULL AND status = 'running'
  RETURNING id, share_id, staging_config_id`;

export function claimParameters(userId: string, imageId: string, settings: EffectiveGroupSettings, request: RequestWorkspaceRequest): unknown[] {
  const launchOptions = { clientLanguage: request.client_language, clientTimezone: request.client_timezone, workspaceUrl: request.workspace_url };
  return [userId, imageId, request.enable_sharing ?? false, settings.keepaliveExpiration, JSON.stringify(launchOptions), ...STAGING_FLAG_NAMES.map((name) => settings.clientSettings[name])];
}
