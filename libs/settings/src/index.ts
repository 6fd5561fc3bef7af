export * from './settings.service';
export * from './settings.module';
export * from './setting.entity';
