import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { AppConfig, loadConfig } from '@ws/common';
import { dataSourceOptions } from './data-source';

/** Creates the database when missing (the server's trust or password auth permitting). */
export async function ensureDatabase(config: AppConfig, database = config.DATABASE_NAME): Promise<void> {
  const admin = new Client({ host: config.DATABASE_HOST, port: config.DATABASE_PORT, user: config.DATABASE_USER, password: config.DATABASE_PASSWORD, database: 'postgres' });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${database}"`);
  } finally {
    await admin.end();
  }
}

export async function dropDatabase(config: AppConfig, database: string): Promise<void> {
  const admin = new Client({ host: config.DATABASE_HOST, port: config.DATABASE_PORT, user: config.DATABASE_USER, password: config.DATABASE_PASSWORD, database: 'postgres' });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** Creates the database if needed and applies every pending migration, each in its own transaction. */
export async function migrate(config: AppConfig, database = config.DATABASE_NAME): Promise<string[]> {
  await ensureDatabase(config, database);
  const source = new DataSource({ ...dataSourceOptions(config, database), migrationsTransactionMode: 'each' });
  await source.initialize();
  try {
    const applied = await source.runMigrations();
    return applied.map((m) => m.name);
  } finally {
    await source.destroy();
  }
}

if (require.main === module) {
  const config = loadConfig();
  migrate(config)
    .then((names) => {
      console.log(names.length ? `migrated ${config.DATABASE_NAME}: ${names.join(', ')}` : `database ${config.DATABASE_NAME} is up to date`);
    })
    .catch((err: Error) => {
      console.error(`migration failed: ${err.message}`);
      process.exit(1);
    });
}
