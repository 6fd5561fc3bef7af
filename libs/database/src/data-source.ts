import { join } from 'node:path';
import { Client } from 'pg';
import type { DataSourceOptions } from 'typeorm';
import { AppConfig, markDependency } from '@ws/common';
import { SnakeNamingStrategy } from './naming.strategy';

/** Compiled migrations sit in dist/migrations; under ts (jest) the sources are loaded. */
const MIGRATIONS_GLOB = join(__dirname, '..', '..', '..', 'migrations', '*.{js,ts}');

/**
 * The pool's connections: a failure to connect (a bare socket error such as ECONNREFUSED) is marked as
 * PostgreSQL's, so the 503 it becomes names the dependency.
 */
class DatabaseClient extends Client {
  override connect(): Promise<Client>;
  override connect(callback: (err: Error | null, client?: Client) => void): void;
  override connect(callback?: (err: Error | null, client?: Client) => void): Promise<Client> | void {
    if (!callback) return super.connect().catch((err: Error) => Promise.reject(markDependency(err, 'PostgreSQL')));
    return super.connect((err: Error | null) => callback(err ? markDependency(err, 'PostgreSQL') : null, this));
  }
}

/**
 * Connection, migrations and naming. The entities are the caller's: each area registers its own with the Nest
 * modules (autoLoadEntities); tools outside them pass a list (apps/cli/src/entities.ts). Migrations need none.
 */
export function dataSourceOptions(config: AppConfig, database = config.DATABASE_NAME, entities: DataSourceOptions['entities'] = []): DataSourceOptions {
  return {
    type: 'postgres',
    host: config.DATABASE_HOST,
    port: config.DATABASE_PORT,
    username: config.DATABASE_USER,
    password: config.DATABASE_PASSWORD,
    database,
    entities,
    migrations: [MIGRATIONS_GLOB],
    migrationsTableName: 'migrations',
    namingStrategy: new SnakeNamingStrategy(),
    synchronize: false,
    // Connecting (and waiting for a pooled connection) is bounded, so an unreachable server fails fast;
    // keepalive lets the kernel notice a peer that vanished without closing the connection.
    extra: {
      max: config.DATABASE_POOL_SIZE, application_name: 'workspace-server',
      connectionTimeoutMillis: config.DEPENDENCY_TIMEOUT_MS, keepAlive: true, Client: DatabaseClient,
    },
  };
}

/**
 * Statement bounds for the running services (not for migrations, which may take long). The server cancels a
 * statement at DEPENDENCY_TIMEOUT_MS and the connection stays usable; if the server itself is stalled the
 * client gives up a second later. Either way the request answers 503 instead of waiting.
 */
export function runtimeDataSourceOptions(config: AppConfig): DataSourceOptions {
  const options = dataSourceOptions(config);
  return {
    ...options,
    extra: { ...options.extra, statement_timeout: config.DEPENDENCY_TIMEOUT_MS, query_timeout: config.DEPENDENCY_TIMEOUT_MS + 1000 },
  } as DataSourceOptions;
}
