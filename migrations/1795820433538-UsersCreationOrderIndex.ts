import { MigrationInterface, QueryRunner } from 'typeorm';

/** get_users pages in creation order, (created_at, id): each page is an index range instead of a sort of every user. */
export class UsersCreationOrderIndex1795820433538 implements MigrationInterface {
    name = 'UsersCreationOrderIndex1795820433538';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE INDEX "ix_users_creation_order" ON "users" ("created_at", "id")
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            DROP INDEX "public"."ix_users_creation_order"
        `);
    }
}
