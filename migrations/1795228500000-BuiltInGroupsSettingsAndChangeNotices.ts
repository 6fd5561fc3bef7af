import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Built-in groups, default global settings, and change notices: every api process LISTENs on
 * `api_key_changed` and `session_token_changed` and drops what it cached, so a revocation takes effect at
 * once on every replica, whoever made it (api, CLI, or SQL by hand).
 */
export class BuiltInGroupsSettingsAndChangeNotices1795228500000 implements MigrationInterface {
  name = 'BuiltInGroupsSettingsAndChangeNotices1795228500000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      INSERT INTO groups (id, name, description, system_key, permissions, priority, keepalive_expiration)
      VALUES
        (gen_random_uuid(), 'All Users', 'Every user is a member', 'all_users', '{User}', 1000, 3600),
        (gen_random_uuid(), 'Administrators', 'Holds Global Admin', 'administrators', '{"Global Admin"}', 1, 3600)
    `);
    await q.query(`
      INSERT INTO settings (key, value) VALUES
        ('session_lifetime', '86400'),
        ('same_site_cookie_policy', '"Lax"'),
        ('default_keepalive_expiration', '3600'),
        ('login_link_lifetime', '300')
    `);
    await q.query(`
      CREATE FUNCTION notify_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('api_key_changed', OLD.api_key); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE ON api_keys
      FOR EACH ROW EXECUTE FUNCTION notify_api_key_changed()
    `);
    await q.query(`
      CREATE FUNCTION notify_session_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('session_token_changed', OLD.id::text); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER session_tokens_changed AFTER UPDATE OR DELETE ON session_tokens
      FOR EACH ROW EXECUTE FUNCTION notify_session_token_changed()
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER session_tokens_changed ON session_tokens');
    await q.query('DROP FUNCTION notify_session_token_changed');
    await q.query('DROP TRIGGER api_keys_changed ON api_keys');
    await q.query('DROP FUNCTION notify_api_key_changed');
    await q.query(`DELETE FROM settings WHERE key IN ('session_lifetime', 'same_site_cookie_policy', 'default_keepalive_expiration', 'login_link_lifetime')`);
    await q.query(`DELETE FROM groups WHERE system_key IS NOT NULL`);
  }
}
