// What other libraries and the apps use of @ws/profiles; everything else is internal to it.
export { PersistentProfile } from './persistent-profile.entity';
export { GENERATION_KEY, InvalidProfilePathError, resolveProfileLocation } from './profile-location';
export { mib } from './profile-meter';
export { ProfileSync } from './profile-sync.service';
export { ProfilesModule } from './profiles.module';
