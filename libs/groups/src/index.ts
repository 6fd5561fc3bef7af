// What other libraries and the apps use of @ws/groups; everything else is internal to it.
export { CONFIG_CLIENT_SETTING_FLAGS, DEFAULT_CLIENT_SETTINGS, effectiveSettings, usageWindowStart } from './group-settings';
export type { ClientSettings, EffectiveGroupSettings, SettingsGroup } from './group-settings';
export { Group, UserGroup } from './group.entity';
export type { UsageInterval } from './group.entity';
export { GroupsModule } from './groups.module';
export { GroupsService } from './groups.service';
