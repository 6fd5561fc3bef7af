// What other libraries and the apps use of @ws/settings; everything else is internal to it.
export { Setting } from './setting.entity';
export { SettingsModule } from './settings.module';
export { integerSettingSql, SettingsService } from './settings.service';
