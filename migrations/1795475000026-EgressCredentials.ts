import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Egress: `egress_providers` (type CHECKed), their `egress_gateways`, `egress_credentials` (attached to exactly
 * one user, group or image: CHECK), `egress_credential_gateways` (selected gateways) and `egress_connections`
 * (one row per workspace using a credential: the live `active_connections`).
 */
export class EgressCredentials1795475000026 implements MigrationInterface {
    name = 'EgressCredentials1795475000026';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "egress_providers" (
                "id" uuid NOT NULL,
                "name" text NOT NULL,
                "type" text NOT NULL,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "ck_egress_providers_type" CHECK (
                    "type" IN (
                        'username_password_vpn',
                        'key_pair_tunnel',
                        'mesh_network',
                        'custom'
                    )
                ),
                CONSTRAINT "PK_8d68ae99e7fd0eab65c8a233790" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "IDX_9344be83815c70183e6354c980" ON "egress_providers" ("name")
        `);
        await queryRunner.query(`
            CREATE TABLE "egress_gateways" (
                "id" uuid NOT NULL,
                "provider_id" uuid NOT NULL,
                "name" text NOT NULL,
                "endpoint" text NOT NULL DEFAULT '',
                "config" jsonb NOT NULL DEFAULT '{}',
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_023e9027282d58d9de5b7df0d08" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE UNIQUE INDEX "uq_egress_gateways_provider_name" ON "egress_gateways" ("provider_id", "name")
        `);
        await queryRunner.query(`
            CREATE TABLE "egress_credentials" (
                "id" uuid NOT NULL,
                "name" text NOT NULL,
                "provider_id" uuid NOT NULL,
                "enabled" boolean NOT NULL DEFAULT true,
                "username" text,
                "password" text,
                "vpn_private_key" text,
                "mesh_key" text,
                "custom_credential" text,
                "user_id" uuid,
                "group_id" uuid,
                "image_id" uuid,
                "allow_all_gateways" boolean NOT NULL DEFAULT false,
                "limit_active_connections" boolean NOT NULL DEFAULT false,
                "active_connection_limit" integer,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "ck_egress_credentials_limited" CHECK (
                    NOT "limit_active_connections"
                    OR "active_connection_limit" IS NOT NULL
                ),
                CONSTRAINT "ck_egress_credentials_limit" CHECK (
                    "active_connection_limit" IS NULL
                    OR "active_connection_limit" > 0
                ),
                CONSTRAINT "ck_egress_credentials_one_owner" CHECK (
                    num_nonnulls("user_id", "group_id", "image_id") = 1
                ),
                CONSTRAINT "PK_bfaa0086773b4b5fe15976265fd" PRIMARY KEY ("id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_8a23c1af5c03f7397df91de401" ON "egress_credentials" ("provider_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_5e28dbd609f8188df7c6161458" ON "egress_credentials" ("user_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_3220dfba3efa93b67beb267159" ON "egress_credentials" ("group_id")
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_6ec6dcabe60cea60c3b536b498" ON "egress_credentials" ("image_id")
        `);
        await queryRunner.query(`
            CREATE TABLE "egress_credential_gateways" (
                "credential_id" uuid NOT NULL,
                "gateway_id" uuid NOT NULL,
                CONSTRAINT "PK_087ada41f68902bb6f1974c2a61" PRIMARY KEY ("credential_id", "gateway_id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_2d3127e8f029a9d0b4bcac2c11" ON "egress_credential_gateways" ("gateway_id")
        `);
        await queryRunner.query(`
            CREATE TABLE "egress_connections" (
                "workspace_id" uuid NOT NULL,
                "credential_id" uuid NOT NULL,
                "gateway_id" uuid,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
                CONSTRAINT "PK_4ece50d4df13afd7f2b8e4b7f4e" PRIMARY KEY ("workspace_id")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_130fd8d67eed51c465292ae313" ON "egress_connections" ("credential_id")
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_gateways"
            ADD CONSTRAINT "FK_29d9a09c3fa3bcacd106e7885f0" FOREIGN KEY ("provider_id") REFERENCES "egress_providers"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials"
            ADD CONSTRAINT "FK_8a23c1af5c03f7397df91de4012" FOREIGN KEY ("provider_id") REFERENCES "egress_providers"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials"
            ADD CONSTRAINT "FK_5e28dbd609f8188df7c61614580" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials"
            ADD CONSTRAINT "FK_3220dfba3efa93b67beb2671593" FOREIGN KEY ("group_id") REFERENCES "groups"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials"
            ADD CONSTRAINT "FK_6ec6dcabe60cea60c3b536b498c" FOREIGN KEY ("image_id") REFERENCES "images"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credential_gateways"
            ADD CONSTRAINT "FK_ba7014bcfc590c5661045d7c550" FOREIGN KEY ("credential_id") REFERENCES "egress_credentials"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credential_gateways"
            ADD CONSTRAINT "FK_2d3127e8f029a9d0b4bcac2c113" FOREIGN KEY ("gateway_id") REFERENCES "egress_gateways"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_connections"
            ADD CONSTRAINT "FK_130fd8d67eed51c465292ae3132" FOREIGN KEY ("credential_id") REFERENCES "egress_credentials"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_connections"
            ADD CONSTRAINT "FK_77e5ceb9471776f69f0e4b699ac" FOREIGN KEY ("gateway_id") REFERENCES "egress_gateways"("id") ON DELETE
            SET NULL ON UPDATE NO ACTION
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "egress_connections" DROP CONSTRAINT "FK_77e5ceb9471776f69f0e4b699ac"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_connections" DROP CONSTRAINT "FK_130fd8d67eed51c465292ae3132"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credential_gateways" DROP CONSTRAINT "FK_2d3127e8f029a9d0b4bcac2c113"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credential_gateways" DROP CONSTRAINT "FK_ba7014bcfc590c5661045d7c550"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials" DROP CONSTRAINT "FK_6ec6dcabe60cea60c3b536b498c"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials" DROP CONSTRAINT "FK_3220dfba3efa93b67beb2671593"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials" DROP CONSTRAINT "FK_5e28dbd609f8188df7c61614580"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_credentials" DROP CONSTRAINT "FK_8a23c1af5c03f7397df91de4012"
        `);
        await queryRunner.query(`
            ALTER TABLE "egress_gateways" DROP CONSTRAINT "FK_29d9a09c3fa3bcacd106e7885f0"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_130fd8d67eed51c465292ae313"
        `);
        await queryRunner.query(`
            DROP TABLE "egress_connections"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_2d3127e8f029a9d0b4bcac2c11"
        `);
        await queryRunner.query(`
            DROP TABLE "egress_credential_gateways"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_6ec6dcabe60cea60c3b536b498"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_3220dfba3efa93b67beb267159"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_5e28dbd609f8188df7c6161458"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_8a23c1af5c03f7397df91de401"
        `);
        await queryRunner.query(`
            DROP TABLE "egress_credentials"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."uq_egress_gateways_provider_name"
        `);
        await queryRunner.query(`
            DROP TABLE "egress_gateways"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_9344be83815c70183e6354c980"
        `);
        await queryRunner.query(`
            DROP TABLE "egress_providers"
        `);
    }

}
