import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { newId, toWireId } from '@ws/common';
import { findByRef } from '@ws/database/find-by-ref';
import { Zone } from './zone.entity';

export const DEFAULT_ZONE = 'default';

@Injectable()
export class ZonesService {
  constructor(@InjectRepository(Zone) private readonly zones: Repository<Zone>) {}

  list(): Promise<Zone[]> {
    return this.zones.find({ order: { name: 'ASC' } });
  }

  findByRef(ref: string): Promise<Zone> {
    return findByRef(this.zones, ref, 'name', 'zone');
  }

  /** The zone by name, made when missing. */
  async ensure(name: string): Promise<Zone> {
    await this.zones.createQueryBuilder().insert().values({ id: newId(), name }).orIgnore().execute();
    return this.zones.findOneByOrFail({ name });
  }

  async remove(ref: string): Promise<void> {
    const zone = await this.findByRef(ref);
    await this.zones.delete({ id: zone.id });
  }
}

const mask = (secret: string) => (secret ? '*'.repeat(Math.min(secret.length, 16)) : '');

export function toZoneResponse(z: Zone, brief = false) {
  if (brief) return { zone_id: toWireId(z.id), zone_name: z.name };
  return {
    zone_id: toWireId(z.id), zone_name: z.name, auto_scaling_enabled: z.autoScalingEnabled, cloud_enabled: z.cloudEnabled, cloud_region: z.cloudRegion,
    cloud_access_key_id: z.cloudAccessKeyId, cloud_secret_access_key: mask(z.cloudSecretAccessKey), cloud_agent_image_id: z.cloudAgentImageId,
  };
}
