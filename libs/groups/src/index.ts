export * from './group.entity';
export * from './groups.service';
export * from './groups.module';
export * from './group-settings';
