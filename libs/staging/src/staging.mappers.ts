import { toWireId } from '@ws/common';
import { STAGING_FLAG_NAMES, STAGING_FLAGS, StagingConfig } from './staging-config.entity';

export interface StagingConfigView {
  config: StagingConfig;
  zoneName: string;
  imageFriendlyName: string;
  /** Unassigned staged workspaces that run now (ready to hand out). */
  numCurrentSessions: number;
}

export function toStagingConfigResponse({ config, zoneName, imageFriendlyName, numCurrentSessions }: StagingConfigView) {
  const flags = Object.fromEntries(STAGING_FLAG_NAMES.map((name) => [name, config[STAGING_FLAGS[name]]]));
  return {
    staging_config_id: toWireId(config.id),
    zone_id: toWireId(config.zoneId),
    zone_name: zoneName,
    image_id: toWireId(config.imageId),
    image_friendly_name: imageFriendlyName,
    num_sessions: config.numSessions,
    num_current_sessions: numCurrentSessions,
    expiration: config.expiration,
    ...flags,
  };
}
