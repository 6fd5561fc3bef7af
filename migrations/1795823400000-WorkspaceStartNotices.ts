import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `workspace_start_changed` notices: when a starting workspace's status or progress changes (the worker's provision
 * steps, `running`, a failure or a removal), every api process learns it at once, so a browser waiting on its link
 * (POST /api/client/connect with `wait_while_starting`) gets the change without polling.
 */
export class WorkspaceStartNotices1795823400000 implements MigrationInterface {
  name = 'WorkspaceStartNotices1795823400000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION notify_workspace_start_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('workspace_start_changed', NEW.id::text); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER workspaces_start_changed AFTER UPDATE OF status, operational_progress, operational_message ON workspaces
      FOR EACH ROW WHEN (OLD.status = 'starting' AND (OLD.status IS DISTINCT FROM NEW.status
        OR OLD.operational_progress IS DISTINCT FROM NEW.operational_progress OR OLD.operational_message IS DISTINCT FROM NEW.operational_message))
      EXECUTE FUNCTION notify_workspace_start_changed()
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER workspaces_start_changed ON workspaces');
    await q.query('DROP FUNCTION notify_workspace_start_changed');
  }
}
