import { MigrationInterface, QueryRunner } from "typeorm";

export class WorkspaceSessionsAndUsageWindow1795228736569 implements MigrationInterface {
    name = 'WorkspaceSessionsAndUsageWindow1795228736569'

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "groups"
            ADD "usage_interval" text NOT NULL DEFAULT 'total'
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD "session_token_id" uuid
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD "launch_options" jsonb NOT NULL DEFAULT '{}'
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP COLUMN "launch_options"
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP COLUMN "session_token_id"
        `);
        await queryRunner.query(`
            ALTER TABLE "groups" DROP COLUMN "usage_interval"
        `);
    }

}
