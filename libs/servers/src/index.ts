// What other libraries and the apps use of @ws/servers; everything else is internal to it.
export { Server } from './server.entity';
export { PLACEMENT_LOCK_KEY_SQL } from './placement-lock';
export type { ServerHealthState } from './server.entity';
export { ServerHealth } from './server-health';
export type { HealthRound } from './server-health';
export { ServersModule } from './servers.module';
export { LOCAL_SERVER, ServersService, checkCapacitySettings } from './servers.service';
export { ServerImage } from './server-image.entity';
export { ServerInventory, inventoryReferencesOf } from './server-inventory';
export { ImageDistribution } from './image-distribution';
export type { DistributionProgress, DistributionOutcome } from './image-distribution';
