export * from './persistent-profile.entity';
export * from './profile-location';
export * from './profile-meter';
export * from './profile-sync.service';
export * from './profiles.module';
