import { MigrationInterface, QueryRunner } from 'typeorm';

/** A partial index over live workspaces (status not deleted): the license's seat count stays cheap as history grows. */
export class LiveWorkspaceStatusIndex1795476564606 implements MigrationInterface {
    name = 'LiveWorkspaceStatusIndex1795476564606';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE INDEX "ix_workspaces_live_status" ON "workspaces" ("status")
            WHERE status <> 'deleted'
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            DROP INDEX "public"."ix_workspaces_live_status"
        `);
    }
}
