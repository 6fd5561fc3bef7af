import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `api_key_changed` also on insert: api processes remember unknown keys for a few seconds (so a flood of
 * them costs no query), and a key created afterwards (api, CLI, or SQL by hand) must work at once on every
 * replica.
 */
export class ApiKeyInsertNotices1795229300000 implements MigrationInterface {
  name = 'ApiKeyInsertNotices1795229300000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION notify_api_key_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('api_key_changed', NEW.api_key); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER api_keys_inserted AFTER INSERT ON api_keys
      FOR EACH ROW EXECUTE FUNCTION notify_api_key_inserted()
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER api_keys_inserted ON api_keys');
    await q.query('DROP FUNCTION notify_api_key_inserted');
  }
}
