import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 19: a desktop that was ever someone's never returns to a staging pool, and a user is never deleted from
 * under a live workspace.
 * - `workspaces.assigned_at`: when the workspace first had a user; a pool takes only rows where it is null.
 *   Backfilled for every row that has or had a user: not staged, owned now, given a session token (a claim), or
 *   with an `assigned` event still in the outbox. Rows whose owner was deleted stop counting as staged.
 * - `users.joined_workspace_id`: the workspace an anonymous viewer was made for by join_workspace (removed with it).
 * - A trigger refuses to delete a user who still owns a starting, running or failed workspace (SQLSTATE WSL01):
 *   the foreign key's SET NULL stays for history and for workspaces already stopping.
 */
export class NeverReassignWorkspaces1795491019190 implements MigrationInterface {
    name = 'NeverReassignWorkspaces1795491019190';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD "assigned_at" TIMESTAMP WITH TIME ZONE
        `);
        await queryRunner.query(`
            UPDATE "workspaces" SET "assigned_at" = "start_date"
             WHERE "staging_config_id" IS NULL OR "user_id" IS NOT NULL OR "session_token_id" IS NOT NULL
                OR "id" IN (SELECT "workspace_id" FROM "workspace_events" WHERE "type" = 'assigned')
        `);
        await queryRunner.query(`
            ALTER TABLE "users"
            ADD "joined_workspace_id" uuid
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_f8ece33dd6621f481fd01fc0ee" ON "users" ("joined_workspace_id")
        `);
        await queryRunner.query(`
            CREATE FUNCTION refuse_deleting_owner_of_live_workspaces() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF EXISTS (SELECT 1 FROM workspaces WHERE user_id = OLD.id AND status IN ('starting', 'running', 'failed')) THEN
                RAISE EXCEPTION 'user % still owns a live workspace; end it first', OLD.id USING ERRCODE = 'WSL01';
              END IF;
              RETURN OLD;
            END $$
        `);
        await queryRunner.query(`
            CREATE TRIGGER users_owning_live_workspaces BEFORE DELETE ON "users"
            FOR EACH ROW EXECUTE FUNCTION refuse_deleting_owner_of_live_workspaces()
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            DROP TRIGGER users_owning_live_workspaces ON "users"
        `);
        await queryRunner.query(`
            DROP FUNCTION refuse_deleting_owner_of_live_workspaces
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_f8ece33dd6621f481fd01fc0ee"
        `);
        await queryRunner.query(`
            ALTER TABLE "users" DROP COLUMN "joined_workspace_id"
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP COLUMN "assigned_at"
        `);
    }
}
