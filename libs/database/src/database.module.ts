import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AppConfig } from '@ws/common';
import { runtimeDataSourceOptions } from './data-source';
import { PgNotifications } from './pg-notifications';

@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [AppConfig],
      // Each area module registers its own entities (TypeOrmModule.forFeature); this library knows none of them.
      useFactory: (config: AppConfig) => ({ ...runtimeDataSourceOptions(config), autoLoadEntities: true, migrationsRun: false }),
    }),
  ],
  providers: [PgNotifications],
  exports: [PgNotifications],
})
export class DatabaseModule {}
