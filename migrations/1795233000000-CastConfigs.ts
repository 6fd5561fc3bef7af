import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Casting: `cast_configs` (public launch links; `key` unique), `workspaces.client_settings_override` (a cast
 * link's enforced client settings), `images.selectable_networks` (networks a cast visitor may choose), and the global settings the captcha of a cast link uses
 * (`recaptcha_site_key`, `recaptcha_private_key`; empty until an operator sets them).
 */
export class CastConfigs1795233000000 implements MigrationInterface {
  name = 'CastConfigs1795233000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "cast_configs" (
        "id" uuid NOT NULL,
        "name" text NOT NULL,
        "image_id" uuid NOT NULL,
        "key" text NOT NULL,
        "allowed_referrers" text array NOT NULL DEFAULT '{}',
        "limit_sessions" boolean NOT NULL,
        "session_remaining" integer NOT NULL,
        "limit_ips" boolean NOT NULL,
        "ip_request_limit" integer NOT NULL,
        "ip_request_seconds" integer NOT NULL,
        "error_url" text,
        "enable_sharing" boolean NOT NULL,
        "disable_control_panel" boolean NOT NULL,
        "disable_tips" boolean NOT NULL,
        "disable_fixed_res" boolean NOT NULL,
        "allow_anonymous" boolean NOT NULL,
        "group_id" uuid,
        "require_recaptcha" boolean NOT NULL,
        "workspace_url" text,
        "dynamic_workspace_url" boolean NOT NULL,
        "dynamic_container_network" boolean NOT NULL,
        "allow_resume" boolean NOT NULL,
        "enforce_client_settings" boolean NOT NULL,
        "allow_workspace_audio" boolean NOT NULL,
        "allow_workspace_uploads" boolean NOT NULL,
        "allow_workspace_downloads" boolean NOT NULL,
        "allow_workspace_clipboard_down" boolean NOT NULL,
        "allow_workspace_clipboard_up" boolean NOT NULL,
        "allow_workspace_microphone" boolean NOT NULL,
        "allow_workspace_sharing" boolean NOT NULL,
        "workspace_audio_default_on" boolean NOT NULL,
        "workspace_ime_mode_default_on" boolean NOT NULL,
        "valid_until" TIMESTAMP WITH TIME ZONE,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_25afdf3f0814bd42cb5fda183e8" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE UNIQUE INDEX "IDX_00ae00e5e41178971e8feafc40" ON "cast_configs" ("key")`);
    await q.query(`
      ALTER TABLE "cast_configs" ADD CONSTRAINT "FK_f185eddbb3475436ee8bf8a8941"
      FOREIGN KEY ("image_id") REFERENCES "images"("id") ON DELETE CASCADE ON UPDATE NO ACTION
    `);
    await q.query(`
      ALTER TABLE "cast_configs" ADD CONSTRAINT "FK_fee772c88cad67450b62a58fab7"
      FOREIGN KEY ("group_id") REFERENCES "groups"("id") ON DELETE SET NULL ON UPDATE NO ACTION
    `);
    await q.query(`ALTER TABLE "workspaces" ADD "client_settings_override" jsonb NOT NULL DEFAULT '{}'`);
    await q.query(`ALTER TABLE "images" ADD "selectable_networks" text array NOT NULL DEFAULT '{}'`);
    await q.query(`INSERT INTO settings (key, value) VALUES ('recaptcha_site_key', '""'), ('recaptcha_private_key', '""') ON CONFLICT (key) DO NOTHING`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM settings WHERE key IN ('recaptcha_site_key', 'recaptcha_private_key')`);
    await q.query(`ALTER TABLE "workspaces" DROP COLUMN "client_settings_override"`);
    await q.query(`ALTER TABLE "images" DROP COLUMN "selectable_networks"`);
    await q.query(`ALTER TABLE "cast_configs" DROP CONSTRAINT "FK_fee772c88cad67450b62a58fab7"`);
    await q.query(`ALTER TABLE "cast_configs" DROP CONSTRAINT "FK_f185eddbb3475436ee8bf8a8941"`);
    await q.query(`DROP INDEX "public"."IDX_00ae00e5e41178971e8feafc40"`);
    await q.query(`DROP TABLE "cast_configs"`);
  }
}
