import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Licenses: `licenses` (one row per activated license_id: the signed key, the applied seats, when), and the
 * `license_changed` notice on any change, so every api process and worker applies an activation at once.
 */
export class Licenses1795474237548 implements MigrationInterface {
    name = 'Licenses1795474237548';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "licenses" (
                "license_id" text NOT NULL,
                "activation_key" text NOT NULL,
                "seats" integer NOT NULL,
                "issued_to" text NOT NULL,
                "activated_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                CONSTRAINT "PK_a880a1847889df2d497e93a2950" PRIMARY KEY ("license_id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_7eba8236066b4980b69d596aee" ON "licenses" ("activated_at")
        `);
        await queryRunner.query(`
            CREATE FUNCTION notify_license_changed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('license_changed', ''); RETURN NULL; END $$
        `);
        await queryRunner.query(`
            CREATE TRIGGER licenses_changed AFTER INSERT OR UPDATE OR DELETE ON licenses
            FOR EACH STATEMENT EXECUTE FUNCTION notify_license_changed()
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            DROP TRIGGER licenses_changed ON licenses
        `);
        await queryRunner.query(`
            DROP FUNCTION notify_license_changed
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_7eba8236066b4980b69d596aee"
        `);
        await queryRunner.query(`
            DROP TABLE "licenses"
        `);
    }

}
