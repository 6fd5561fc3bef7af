import { formatTimestamp, toWireId } from '@ws/common';
import { CAST_FLAG_NAMES, CAST_FLAGS, CastConfig } from './cast-config.entity';

/** A config loaded with its image and group (for image_friendly_name and group_name). */
export function toCastConfigResponse(config: CastConfig) {
  const flags = Object.fromEntries(CAST_FLAG_NAMES.map((name) => [name, config[CAST_FLAGS[name]]]));
  return {
    cast_config_id: toWireId(config.id),
    casting_config_name: config.name,
    image_id: toWireId(config.imageId),
    image_friendly_name: config.image?.friendlyName ?? null,
    allowed_referrers: config.allowedReferrers,
    session_remaining: config.sessionRemaining,
    ip_request_limit: config.ipRequestLimit,
    ip_request_seconds: config.ipRequestSeconds,
    error_url: config.errorUrl,
    key: config.key,
    group_id: toWireId(config.groupId),
    group_name: config.group?.name ?? null,
    workspace_url: config.workspaceUrl,
    valid_until: formatTimestamp(config.validUntil),
    ...flags,
  };
}
