import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { AppConfig } from '@ws/common';
import { migrate } from '@ws/database';

/**
 * A suite's database, copied from a migrated template (`CREATE DATABASE … TEMPLATE`, a fraction of a second)
 * instead of running every migration for each of the ~75 apis the e2e suites start (about two seconds each).
 *
 * The template is named by a hash of the migration sources, so a changed or added migration makes a new one and a
 * stale one is never copied. It is built under another name and renamed when complete, under an advisory lock,
 * so suites running at once (jest workers) build it once and never copy a half-migrated one.
 */
const MIGRATIONS_DIR = resolve(__dirname, '..', '..', 'migrations');
const TEMPLATE_PREFIX = 'ws_e2e_template_';
/** Any fixed number: the lock only has to be the same in every suite process. */
const TEMPLATE_LOCK = 4_871_203;

export function templateName(): string {
  const hash = createHash('sha256');
  for (const file of readdirSync(MIGRATIONS_DIR).filter((f) => /\.(ts|js)$/.test(f)).sort()) {
    hash.update(file).update('\0').update(readFileSync(join(MIGRATIONS_DIR, file))).update('\0');
  }
  return `${TEMPLATE_PREFIX}${hash.digest('hex').slice(0, 16)}`;
}

export async function createSuiteDatabase(config: AppConfig, database: string): Promise<void> {
  const template = templateName();
  const admin = new Client({ host: config.DATABASE_HOST, port: config.DATABASE_PORT, user: config.DATABASE_USER, password: config.DATABASE_PASSWORD, database: 'postgres' });
  await admin.connect();
  try {
    await admin.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK]);
    const exists = async (name: string) => ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount ?? 0) > 0;
    if (!(await exists(template))) {
      const building = `${template}_building`;
      // Left by a suite killed while building, or made by an older set of migrations: neither is ever copied.
      const stale = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE '${TEMPLATE_PREFIX}%'`);
      for (const { datname } of stale.rows as Array<{ datname: string }>) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
      await migrate(config, building);
      await admin.query(`ALTER DATABASE "${building}" RENAME TO "${template}"`);
    }
    await admin.query(`CREATE DATABASE "${database}" TEMPLATE "${template}"`);
  } finally {
    await admin.query('SELECT pg_advisory_unlock($1)', [TEMPLATE_LOCK]).catch(() => undefined);
    await admin.end();
  }
}
