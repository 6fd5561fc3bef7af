import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `user_access_changed` notices: when a user's `locked` or `disabled` changes (api, CLI, or SQL by hand),
 * every api process re-checks the streams of that user and of that user's workspaces, so a lock closes
 * them at once on every replica.
 */
export class UserAccessChangeNotices1795229000000 implements MigrationInterface {
  name = 'UserAccessChangeNotices1795229000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION notify_user_access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('user_access_changed', NEW.id::text); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER users_access_changed AFTER UPDATE OF locked, disabled ON users
      FOR EACH ROW WHEN (OLD.locked IS DISTINCT FROM NEW.locked OR OLD.disabled IS DISTINCT FROM NEW.disabled)
      EXECUTE FUNCTION notify_user_access_changed()
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER users_access_changed ON users');
    await q.query('DROP FUNCTION notify_user_access_changed');
  }
}
