// What other libraries and the apps use of @ws/zones; everything else is internal to it.
export { Zone } from './zone.entity';
export { ZonesModule } from './zones.module';
export { DEFAULT_ZONE, ZonesService, toZoneResponse } from './zones.service';
export type { ZoneChanges } from './zones.service';
