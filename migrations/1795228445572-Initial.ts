import { MigrationInterface, QueryRunner } from "typeorm";

export class Initial1795228445572 implements MigrationInterface {
    name = 'Initial1795228445572'

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "api_keys" (
                "id" uuid NOT NULL,
                "api_key" text NOT NULL,
                "name" text NOT NULL,
                "secret_sha256" text NOT NULL,
                "permissions" text array NOT NULL DEFAULT '{}',
                "read_only" boolean NOT NULL DEFAULT false,
                "expires_at" TIMESTAMP WITH TIME ZONE,
                "revoked_at" TIMESTAMP WITH TIME ZONE,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_5c8a79801b44bd27b79228e1dad" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_9ccce5863aec84d045d778179d" ON "api_keys" ("api_key")
        `);
        await queryRunner.query(`
            CREATE TABLE "users" (
                "id" uuid NOT NULL,
                "username" text NOT NULL,
                "first_name" text,
                "last_name" text,
                "phone" text,
                "organization" text,
                "notes" text,
                "locked" boolean NOT NULL DEFAULT false,
                "disabled" boolean NOT NULL DEFAULT false,
                "realm" text NOT NULL DEFAULT 'local',
                "password_hash" text,
                "anonymous" boolean NOT NULL DEFAULT false,
                "two_factor" boolean NOT NULL DEFAULT false,
                "program_id" text,
                "last_session" TIMESTAMP WITH TIME ZONE,
                "credentials_changed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_a3ffb1c0c8416b9fc6f907b7433" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_fe0bb3f6520ee0469504521e71" ON "users" ("username")
        `);
        await queryRunner.query(`
            CREATE TABLE "groups" (
                "id" uuid NOT NULL,
                "name" text NOT NULL,
                "description" text,
                "system_key" text,
                "permissions" text array NOT NULL DEFAULT '{}',
                "priority" integer NOT NULL DEFAULT '100',
                "keepalive_expiration" integer,
                "usage_limit" integer,
                "default_image_id" uuid,
                "client_settings" jsonb NOT NULL DEFAULT '{}',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_659d1483316afb28afd3a90646e" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_664ea405ae2a10c264d582ee56" ON "groups" ("name")
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_6eea36a4dcd28a92b1fe685a41" ON "groups" ("system_key")
        `);
        await queryRunner.query(`
            CREATE TABLE "user_groups" (
                "user_id" uuid NOT NULL,
                "group_id" uuid NOT NULL,
                "added_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_c95039f66f5d7a452fc53945bfe" PRIMARY KEY ("user_id", "group_id")
            )
        `);
        await queryRunner.query(`
            CREATE TABLE "images" (
                "id" uuid NOT NULL,
                "name" text NOT NULL,
                "friendly_name" text NOT NULL,
                "description" text NOT NULL DEFAULT '',
                "image_src" text NOT NULL DEFAULT '',
                "cores" numeric NOT NULL DEFAULT '1',
                "memory" bigint NOT NULL DEFAULT '2147483648',
                "x_res" integer NOT NULL DEFAULT '1280',
                "y_res" integer NOT NULL DEFAULT '720',
                "cpu_allocation_method" text NOT NULL DEFAULT 'Inherit',
                "enabled" boolean NOT NULL DEFAULT true,
                "is_browser" boolean NOT NULL DEFAULT false,
                "restrict_to_network" boolean NOT NULL DEFAULT false,
                "network_name" text,
                "restrict_to_zone" boolean NOT NULL DEFAULT false,
                "zone_id" uuid,
                "restrict_to_server" boolean NOT NULL DEFAULT false,
                "server_id" uuid,
                "persistent_profile_path" text,
                "container_registry" text,
                "container_user" text,
                "container_token" text,
                "hash" text,
                "volume_mappings" jsonb NOT NULL DEFAULT '{}',
                "persistent_profile_config" jsonb NOT NULL DEFAULT '{}',
                "run_config" jsonb NOT NULL DEFAULT '{}',
                "exec_config" jsonb NOT NULL DEFAULT '{}',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_1fe148074c6a1a91b63cb9ee3c9" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_eefd5fe2896b8f47dbda05ae80" ON "images" ("friendly_name")
        `);
        await queryRunner.query(`
            CREATE TABLE "image_attributes" (
                "id" uuid NOT NULL,
                "image_id" uuid NOT NULL,
                "category" text NOT NULL,
                "name" text NOT NULL,
                "value" text NOT NULL,
                CONSTRAINT "PK_1a0f4a556b37dd44951f15ce7bc" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_e4f6ab593cd153d5a47ef6ed87" ON "image_attributes" ("image_id", "category", "name")
        `);
        await queryRunner.query(`
            CREATE TABLE "zones" (
                "id" uuid NOT NULL,
                "name" text NOT NULL,
                "auto_scaling_enabled" boolean NOT NULL DEFAULT false,
                "cloud_enabled" boolean NOT NULL DEFAULT false,
                "cloud_region" text NOT NULL DEFAULT '',
                "cloud_access_key_id" text NOT NULL DEFAULT '',
                "cloud_secret_access_key" text NOT NULL DEFAULT '',
                "cloud_agent_image_id" text NOT NULL DEFAULT '',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_880484a43ca311707b05895bd4a" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_4f5b05ffd4b4daee685dea35ed" ON "zones" ("name")
        `);
        await queryRunner.query(`
            CREATE TABLE "servers" (
                "id" uuid NOT NULL,
                "hostname" text NOT NULL,
                "docker_endpoint" text NOT NULL,
                "tls_ca_path" text,
                "tls_cert_path" text,
                "tls_key_path" text,
                "publish_host" text NOT NULL DEFAULT '127.0.0.1',
                "zone_id" uuid NOT NULL,
                "enabled" boolean NOT NULL DEFAULT true,
                "cores" numeric NOT NULL,
                "memory" bigint NOT NULL,
                "provider" text NOT NULL DEFAULT 'docker',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_c0947efd9f3db2dcc010164d20b" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_912176f132dab539028cb99028" ON "servers" ("hostname")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_2071c3a1dafa40bf44549b930a" ON "servers" ("zone_id")
        `);
        await queryRunner.query(`
            CREATE TABLE "settings" (
                "key" text NOT NULL,
                "value" jsonb NOT NULL,
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_c8639b7626fa94ba8265628f214" PRIMARY KEY ("key")
            )
        `);
        await queryRunner.query(`
            CREATE TABLE "login_links" (
                "id" uuid NOT NULL,
                "user_id" uuid NOT NULL,
                "secret_sha256" text NOT NULL,
                "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                "used_at" TIMESTAMP WITH TIME ZONE,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_e382a2113315c6bb8992cf97e31" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_3e3b544fc3aed2ff66a97e4da9" ON "login_links" ("user_id")
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_8410a065fb4535753a845c1989" ON "login_links" ("secret_sha256")
        `);
        await queryRunner.query(`
            CREATE TABLE "session_tokens" (
                "id" uuid NOT NULL,
                "user_id" uuid NOT NULL,
                "token_date" TIMESTAMP WITH TIME ZONE NOT NULL,
                "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                "generation" integer NOT NULL DEFAULT '0',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_e1ed1e084316ea54dc239428e49" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_51706cc06a05c24cc4950f731b" ON "session_tokens" ("user_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_d01084dd0616cbf24283ace339" ON "session_tokens" ("expires_at")
        `);
        await queryRunner.query(`
            CREATE TABLE "user_attributes" (
                "id" uuid NOT NULL,
                "user_id" uuid NOT NULL,
                "ssh_public_key" text,
                "show_tips" boolean NOT NULL DEFAULT true,
                "toggle_control_panel" boolean NOT NULL DEFAULT true,
                "chat_sfx" boolean NOT NULL DEFAULT true,
                "default_image_id" uuid,
                "auto_login_workspace" boolean,
                CONSTRAINT "REL_561897ae18add15d070f81ae6f" UNIQUE ("user_id"),
                CONSTRAINT "PK_043020ff63d30b1c03bafed7552" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_561897ae18add15d070f81ae6f" ON "user_attributes" ("user_id")
        `);
        await queryRunner.query(`
            CREATE TABLE "workspaces" (
                "id" uuid NOT NULL,
                "user_id" uuid,
                "image_id" uuid NOT NULL,
                "server_id" uuid,
                "status" text NOT NULL,
                "operational_message" text NOT NULL DEFAULT '',
                "operational_progress" integer NOT NULL DEFAULT '0',
                "container_id" text,
                "container_ip" text,
                "host_ports" jsonb NOT NULL DEFAULT '{}',
                "cores" numeric NOT NULL,
                "memory" bigint NOT NULL,
                "token" text NOT NULL,
                "view_only_token" text NOT NULL,
                "share_id" text NOT NULL,
                "sharing_enabled" boolean NOT NULL DEFAULT false,
                "environment" jsonb NOT NULL DEFAULT '{}',
                "persistent_profile_mode" text,
                "is_persistent_profile" boolean NOT NULL DEFAULT false,
                "start_date" TIMESTAMP WITH TIME ZONE NOT NULL,
                "keepalive_date" TIMESTAMP WITH TIME ZONE NOT NULL,
                "expiration_date" TIMESTAMP WITH TIME ZONE NOT NULL,
                "destroyed_at" TIMESTAMP WITH TIME ZONE,
                "destroy_reason" text,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_098656ae401f3e1a4586f47fd8e" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_78512d762073bf8cb3fc88714c" ON "workspaces" ("user_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_047bb7ff6e4f9decf845460fa3" ON "workspaces" ("status")
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_7e7563f0a2c995dc7334149464" ON "workspaces" ("share_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_f51ea02fb805feb2825ed38320" ON "workspaces" ("expiration_date")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_b2c3f19341ec70760d932e0cd6" ON "workspaces" ("server_id", "status")
        `);
        await queryRunner.query(`
            ALTER TABLE "user_groups"
            ADD CONSTRAINT "FK_95bf94c61795df25a5154350102" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "user_groups"
            ADD CONSTRAINT "FK_4c5f2c23c34f3921fbad2cd3940" FOREIGN KEY ("group_id") REFERENCES "groups"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "image_attributes"
            ADD CONSTRAINT "FK_b26565a1417e8d7504e2ec65859" FOREIGN KEY ("image_id") REFERENCES "images"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "servers"
            ADD CONSTRAINT "FK_2071c3a1dafa40bf44549b930a0" FOREIGN KEY ("zone_id") REFERENCES "zones"("id") ON DELETE RESTRICT ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "login_links"
            ADD CONSTRAINT "FK_3e3b544fc3aed2ff66a97e4da93" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "session_tokens"
            ADD CONSTRAINT "FK_51706cc06a05c24cc4950f731b5" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "user_attributes"
            ADD CONSTRAINT "FK_561897ae18add15d070f81ae6f0" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD CONSTRAINT "FK_78512d762073bf8cb3fc88714c1" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE
            SET NULL ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD CONSTRAINT "FK_73f411b1e9db9f0cdb6c40dc96d" FOREIGN KEY ("image_id") REFERENCES "images"("id") ON DELETE RESTRICT ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces"
            ADD CONSTRAINT "FK_6fd79fbbcd7285bf2a03c8238bf" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE RESTRICT ON UPDATE NO ACTION
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP CONSTRAINT "FK_6fd79fbbcd7285bf2a03c8238bf"
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP CONSTRAINT "FK_73f411b1e9db9f0cdb6c40dc96d"
        `);
        await queryRunner.query(`
            ALTER TABLE "workspaces" DROP CONSTRAINT "FK_78512d762073bf8cb3fc88714c1"
        `);
        await queryRunner.query(`
            ALTER TABLE "user_attributes" DROP CONSTRAINT "FK_561897ae18add15d070f81ae6f0"
        `);
        await queryRunner.query(`
            ALTER TABLE "session_tokens" DROP CONSTRAINT "FK_51706cc06a05c24cc4950f731b5"
        `);
        await queryRunner.query(`
            ALTER TABLE "login_links" DROP CONSTRAINT "FK_3e3b544fc3aed2ff66a97e4da93"
        `);
        await queryRunner.query(`
            ALTER TABLE "servers" DROP CONSTRAINT "FK_2071c3a1dafa40bf44549b930a0"
        `);
        await queryRunner.query(`
            ALTER TABLE "image_attributes" DROP CONSTRAINT "FK_b26565a1417e8d7504e2ec65859"
        `);
        await queryRunner.query(`
            ALTER TABLE "user_groups" DROP CONSTRAINT "FK_4c5f2c23c34f3921fbad2cd3940"
        `);
        await queryRunner.query(`
            ALTER TABLE "user_groups" DROP CONSTRAINT "FK_95bf94c61795df25a5154350102"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_b2c3f19341ec70760d932e0cd6"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_f51ea02fb805feb2825ed38320"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_7e7563f0a2c995dc7334149464"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_047bb7ff6e4f9decf845460fa3"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_78512d762073bf8cb3fc88714c"
        `);
        await queryRunner.query(`
            DROP TABLE "workspaces"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_561897ae18add15d070f81ae6f"
        `);
        await queryRunner.query(`
            DROP TABLE "user_attributes"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_d01084dd0616cbf24283ace339"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_51706cc06a05c24cc4950f731b"
        `);
        await queryRunner.query(`
            DROP TABLE "session_tokens"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_8410a065fb4535753a845c1989"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_3e3b544fc3aed2ff66a97e4da9"
        `);
        await queryRunner.query(`
            DROP TABLE "login_links"
        `);
        await queryRunner.query(`
            DROP TABLE "settings"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_2071c3a1dafa40bf44549b930a"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_912176f132dab539028cb99028"
        `);
        await queryRunner.query(`
            DROP TABLE "servers"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_4f5b05ffd4b4daee685dea35ed"
        `);
        await queryRunner.query(`
            DROP TABLE "zones"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_e4f6ab593cd153d5a47ef6ed87"
        `);
        await queryRunner.query(`
            DROP TABLE "image_attributes"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_eefd5fe2896b8f47dbda05ae80"
        `);
        await queryRunner.query(`
            DROP TABLE "images"
        `);
        await queryRunner.query(`
            DROP TABLE "user_groups"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_6eea36a4dcd28a92b1fe685a41"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_664ea405ae2a10c264d582ee56"
        `);
        await queryRunner.query(`
            DROP TABLE "groups"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_fe0bb3f6520ee0469504521e71"
        `);
        await queryRunner.query(`
            DROP TABLE "users"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_9ccce5863aec84d045d778179d"
        `);
        await queryRunner.query(`
            DROP TABLE "api_keys"
        `);
    }

}
