import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Setting } from './setting.entity';
import { SettingsService } from './settings.service';

@Global()
@Module({ imports: [TypeOrmModule.forFeature([Setting])], providers: [SettingsService], exports: [SettingsService] })
export class SettingsModule {}
