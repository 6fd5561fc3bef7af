import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Image inventory (issue 24, point 4): which image references each server's engine held at its last inventory, and
 * when that was taken (null: never; placement then assumes the server may hold any image, as before).
 */
export class ServerImageInventory1795823190643 implements MigrationInterface {
    name = 'ServerImageInventory1795823190643';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "server_images" (
                "server_id" uuid NOT NULL,
                "reference" text NOT NULL,
                "image_id" text NOT NULL,
                "seen_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                CONSTRAINT "PK_3a1b2cc2b91b44919f7d31cde08" PRIMARY KEY ("server_id", "reference")
            )
        `);
        await queryRunner.query(`
            ALTER TABLE "servers"
            ADD "images_checked_at" TIMESTAMP WITH TIME ZONE
        `);
        await queryRunner.query(`
            ALTER TABLE "server_images"
            ADD CONSTRAINT "FK_2900b70ac3348a3446aba0d225b" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "server_images" DROP CONSTRAINT "FK_2900b70ac3348a3446aba0d225b"
        `);
        await queryRunner.query(`
            ALTER TABLE "servers" DROP COLUMN "images_checked_at"
        `);
        await queryRunner.query(`
            DROP TABLE "server_images"
        `);
    }

}
