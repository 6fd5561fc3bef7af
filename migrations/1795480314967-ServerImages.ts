import { MigrationInterface, QueryRunner } from 'typeorm';

/** Server images (issue 14): images.kind, and server_targets (protocol, host, port, encrypted password) per server image. */
export class ServerImages1795480314967 implements MigrationInterface {
    name = 'ServerImages1795480314967';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "server_targets" (
                "image_id" uuid NOT NULL,
                "protocol" text NOT NULL,
                "host" text NOT NULL,
                "port" integer NOT NULL,
                "username_template" text NOT NULL DEFAULT '',
                "domain" text NOT NULL DEFAULT '',
                "password_encrypted" text,
                "allow_override" text array NOT NULL DEFAULT '{}',
                "rdp_client" text NOT NULL DEFAULT 'guac',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_9b0658e880e29deb60c87e86753" PRIMARY KEY ("image_id")
            )
        `);
        await queryRunner.query(`
            ALTER TABLE "images"
            ADD "kind" text NOT NULL DEFAULT 'container'
        `);
        await queryRunner.query(`
            ALTER TABLE "server_targets"
            ADD CONSTRAINT "FK_9b0658e880e29deb60c87e86753" FOREIGN KEY ("image_id") REFERENCES "images"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "server_targets" DROP CONSTRAINT "FK_9b0658e880e29deb60c87e86753"
        `);
        await queryRunner.query(`
            ALTER TABLE "images" DROP COLUMN "kind"
        `);
        await queryRunner.query(`
            DROP TABLE "server_targets"
        `);
    }

}
