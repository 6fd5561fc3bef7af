import { MigrationInterface, QueryRunner } from 'typeorm';

/** Server sessions (issue 14): the server a workspace of a server image reaches, its password encrypted apart, and a relay's own key. */
export class WorkspaceServerConnections1795490000000 implements MigrationInterface {
    name = 'WorkspaceServerConnections1795490000000';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD "server_connection" jsonb
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD "server_password_encrypted" text
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD "relay_secret" text
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP COLUMN "relay_secret"
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP COLUMN "server_password_encrypted"
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP COLUMN "server_connection"
        `);
    }
}
