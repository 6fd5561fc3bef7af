import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { QueryFailedError, Repository } from 'typeorm';
import { ApiError, ErrorCode, newId, toWireId } from '@ws/common';
import { findByRef } from '@ws/database';
import { Zone } from './zone.entity';

export const DEFAULT_ZONE = 'default';
const UNIQUE_VIOLATION = '23505';

/** The operator-settable fields of a zone (zone set). */
export type ZoneChanges = Partial<Pick<Zone, 'name' | 'autoScalingEnabled' | 'cloudEnabled' | 'cloudRegion' | 'cloudAccessKeyId' | 'cloudSecretAccessKey' | 'cloudAgentImageId'>>;

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

  /** Changes the given fields of a zone (by name or id); omitted ones keep their value. */
  async update(ref: string, changes: ZoneChanges): Promise<Zone> {
    const zone = await this.findByRef(ref);
    const patch = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined)) as ZoneChanges;
    if (patch.name !== undefined && !patch.name.trim()) throw new ApiError(ErrorCode.InvalidRequest, 'zone name must not be empty');
    if (Object.keys(patch).length > 0) {
      try {
        await this.zones.update({ id: zone.id }, patch);
      } catch (err) {
        if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) throw new ApiError(ErrorCode.Conflict, `a zone named ${patch.name} exists`);
        throw err;
      }
    }
    return this.zones.findOneByOrFail({ id: zone.id });
  }

  async remove(ref: string): Promise<void> {
    const zone = await this.findByRef(ref);
    await this.zones.delete({ id: zone.id });
  }
}

/** A set secret is answered as a fixed run of asterisks (its length is not told); an unset one as ''. */
const mask = (secret: string) => (secret ? '********' : '');

/** The spec's Zone; `brief` (get_zones brief: true) answers only the id and the name. */
export function toZoneResponse(z: Zone, brief = false) {
  if (brief) return { zone_id: toWireId(z.id), zone_name: z.name };
  return {
    zone_id: toWireId(z.id), zone_name: z.name, auto_scaling_enabled: z.autoScalingEnabled, cloud_enabled: z.cloudEnabled, cloud_region: z.cloudRegion,
    cloud_access_key_id: z.cloudAccessKeyId, cloud_secret_access_key: mask(z.cloudSecretAccessKey), cloud_agent_image_id: z.cloudAgentImageId,
  };
}
