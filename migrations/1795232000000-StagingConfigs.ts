import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Staging pools: `staging_configs`, and `workspaces.staging_config_id` marking staged workspaces (no foreign
 * key: the reconciler finds and removes staged rows whose config was deleted).
 */
export class StagingConfigs1795232000000 implements MigrationInterface {
  name = 'StagingConfigs1795232000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "staging_configs" (
        "id" uuid NOT NULL,
        "zone_id" uuid NOT NULL,
        "image_id" uuid NOT NULL,
        "num_sessions" integer NOT NULL,
        "expiration" numeric NOT NULL,
        "allow_workspace_audio" boolean NOT NULL,
        "allow_workspace_uploads" boolean NOT NULL,
        "allow_workspace_downloads" boolean NOT NULL,
        "allow_workspace_clipboard_down" boolean NOT NULL,
        "allow_workspace_clipboard_up" boolean NOT NULL,
        "allow_workspace_microphone" boolean NOT NULL,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_43e88b1ed6f208612b2abdfbf73" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE INDEX "IDX_93d038e52c714a90c48d81c83b" ON "staging_configs" ("image_id", "zone_id")`);
    await q.query(`ALTER TABLE "workspaces" ADD "staging_config_id" uuid`);
    await q.query(`CREATE INDEX "IDX_0d11023456cdfd91220b950709" ON "workspaces" ("staging_config_id")`);
    await q.query(`
      ALTER TABLE "staging_configs" ADD CONSTRAINT "FK_35f3407772acac9e09d4f0dd04b"
      FOREIGN KEY ("zone_id") REFERENCES "zones"("id") ON DELETE CASCADE ON UPDATE NO ACTION
    `);
    await q.query(`
      ALTER TABLE "staging_configs" ADD CONSTRAINT "FK_fd517e566e7f47850267f196e3c"
      FOREIGN KEY ("image_id") REFERENCES "images"("id") ON DELETE CASCADE ON UPDATE NO ACTION
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "staging_configs" DROP CONSTRAINT "FK_fd517e566e7f47850267f196e3c"`);
    await q.query(`ALTER TABLE "staging_configs" DROP CONSTRAINT "FK_35f3407772acac9e09d4f0dd04b"`);
    await q.query(`DROP INDEX "public"."IDX_0d11023456cdfd91220b950709"`);
    await q.query(`ALTER TABLE "workspaces" DROP COLUMN "staging_config_id"`);
    await q.query(`DROP INDEX "public"."IDX_93d038e52c714a90c48d81c83b"`);
    await q.query(`DROP TABLE "staging_configs"`);
  }
}
