import { toWireId } from '@ws/common';
import type { Image } from './image.entity';
import { portMapOf } from './images.service';

export const toImageRef = (i: Pick<Image, 'id' | 'name' | 'imageSrc' | 'friendlyName'>) => ({ image_id: toWireId(i.id), name: i.name, image_src: i.imageSrc, friendly_name: i.friendlyName });

/** An item of get_images: every field of the spec's Image table. */
export function toImageResponse(i: Image, names: { zoneName?: string | null } = {}) {
  const portMap = portMapOf(i);
  const attributes = (i.attributes ?? []).length
    ? (i.attributes ?? [])
    : Object.entries(portMap).map(([name, value]) => ({ id: '', imageId: i.id, category: 'port_map', name, value }));
  return {
    image_id: toWireId(i.id),
    name: i.name,
    friendly_name: i.friendlyName,
    description: i.description,
    image_src: i.imageSrc,
    restrict_to_network: i.restrictToNetwork,
    restrict_to_zone: i.restrictToZone,
    restrict_to_server: i.restrictToServer,
    available: i.enabled,
    enabled: i.enabled,
    memory: i.memory,
    cores: i.cores,
    x_res: i.xRes,
    y_res: i.yRes,
    cpu_allocation_method: i.cpuAllocationMethod,
    zone_id: toWireId(i.zoneId),
    zone_name: names.zoneName ?? null,
    server_id: toWireId(i.serverId),
    network_name: i.networkName,
    persistent_profile_path: i.persistentProfilePath,
    container_registry: i.containerRegistry,
    container_user: i.containerUser,
    container_token: i.containerToken ? '*'.repeat(8) : null,
    hash: i.hash,
    volume_mappings: i.volumeMappings,
    persistent_profile_config: i.persistentProfileConfig,
    run_config: i.runConfig,
    exec_config: { first_launch: { environment: i.execConfig.first_launch?.environment ?? {}, cmd: i.execConfig.first_launch?.cmd ?? '' }, go: { cmd: i.execConfig.go?.cmd ?? '' } },
    imageAttributes: attributes.map((a) => ({ image_id: toWireId(i.id), attr_id: toWireId(a.id) || `${a.category}:${a.name}`, name: a.name, category: a.category, value: a.value })),
  };
}
