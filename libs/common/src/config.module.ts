import { DynamicModule, Global, Module } from '@nestjs/common';
import { AppConfig, loadConfig } from './config';

@Global()
@Module({})
export class ConfigModule {
  /** `overrides` lets tests and the CLI run against another database or Redis prefix. */
  static forRoot(overrides: Partial<AppConfig> = {}): DynamicModule {
    const config = Object.assign(loadConfig(), overrides);
    return { module: ConfigModule, providers: [{ provide: AppConfig, useValue: config }], exports: [AppConfig] };
  }
}
