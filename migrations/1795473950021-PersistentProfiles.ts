import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Persistent profiles: `persistent_profiles` (one pointer row per profile location to its current `<uuid>.tar`
 * generation), `workspaces.profile_location` and `profile_state`, and the partial unique index that keeps two
 * live workspaces off one profile location.
 */
export class PersistentProfiles1795473950021 implements MigrationInterface {
  name = 'PersistentProfiles1795473950021';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "persistent_profiles" (
        "location" text NOT NULL,
        "object_key" text NOT NULL,
        "size" bigint NOT NULL,
        "sha256" text NOT NULL,
        "saved_at" TIMESTAMP WITH TIME ZONE NOT NULL,
        "saved_by_workspace_id" uuid,
        CONSTRAINT "PK_b0a304b4ba0dd9944ab0a64272f" PRIMARY KEY ("location")
      )
    `);
    await q.query(`ALTER TABLE "workspaces" ADD "profile_location" text`);
    await q.query(`ALTER TABLE "workspaces" ADD "profile_state" text`);
    await q.query(`
      CREATE UNIQUE INDEX "uq_workspaces_live_profile_location" ON "workspaces" ("profile_location")
      WHERE profile_location IS NOT NULL AND status <> 'deleted'
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "public"."uq_workspaces_live_profile_location"`);
    await q.query(`ALTER TABLE "workspaces" DROP COLUMN "profile_state"`);
    await q.query(`ALTER TABLE "workspaces" DROP COLUMN "profile_location"`);
    await q.query(`DROP TABLE "persistent_profiles"`);
  }
}
