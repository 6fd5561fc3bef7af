import { MigrationInterface, QueryRunner } from "typeorm";

/** Session recordings: `session_recordings` (one row per recorded stream connection) and the group setting `record_sessions`. */
export class SessionRecordings1795473406001 implements MigrationInterface {
    name = 'SessionRecordings1795473406001'

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "session_recordings" (
                "id" uuid NOT NULL,
                "workspace_id" uuid NOT NULL,
                "user_id" uuid,
                "client_id" text NOT NULL,
                "status" text NOT NULL,
                "storage_url" text NOT NULL,
                "capture_prefix" text NOT NULL,
                "segment_count" integer NOT NULL DEFAULT '0',
                "capture_bytes" bigint NOT NULL DEFAULT '0',
                "started_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                "ended_at" TIMESTAMP WITH TIME ZONE,
                "video_key" text,
                "video_bytes" bigint,
                "video_content_type" text,
                "duration_seconds" integer,
                "thumbnail" text,
                "error" text,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_e5b55e7b4c76bed8e96c0997668" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_fef43ad68e2cd7f9222eb95ee3" ON "session_recordings" ("workspace_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_087a255536ab5b1a1ee77eb128" ON "session_recordings" ("status", "updated_at")
        `);
        await queryRunner.query(`
            ALTER TABLE "groups"
            ADD "record_sessions" boolean
        `);
        await queryRunner.query(`
            ALTER TABLE "session_recordings"
            ADD CONSTRAINT "FK_fef43ad68e2cd7f9222eb95ee35" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "session_recordings" DROP CONSTRAINT "FK_fef43ad68e2cd7f9222eb95ee35"
        `);
        await queryRunner.query(`
            ALTER TABLE "groups" DROP COLUMN "record_sessions"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_087a255536ab5b1a1ee77eb128"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_fef43ad68e2cd7f9222eb95ee3"
        `);
        await queryRunner.query(`
            DROP TABLE "session_recordings"
        `);
    }

}
