import { join } from 'node:path';
import { DataSource, DataSourceOptions } from 'typeorm';
import { AppConfig, loadConfig } from '@ws/common';
import { ALL_ENTITIES } from './entities';
import { SnakeNamingStrategy } from './naming.strategy';

/** Compiled migrations sit in dist/migrations; under ts (jest) the sources are loaded. */
const MIGRATIONS_GLOB = join(__dirname, '..', '..', '..', 'migrations', '*.{js,ts}');

export function dataSourceOptions(config: AppConfig, database = config.DATABASE_NAME): DataSourceOptions {
  return {
    type: 'postgres',
    host: config.DATABASE_HOST,
    port: config.DATABASE_PORT,
    username: config.DATABASE_USER,
    password: config.DATABASE_PASSWORD,
    database,
    entities: ALL_ENTITIES,
    migrations: [MIGRATIONS_GLOB],
    migrationsTableName: 'migrations',
    namingStrategy: new SnakeNamingStrategy(),
    synchronize: false,
    extra: { max: config.DATABASE_POOL_SIZE, application_name: 'workspace-server' },
  };
}

/** For the typeorm CLI (migration:generate in scripts/migration-*.sh). */
export default new DataSource(dataSourceOptions(loadConfig()));
