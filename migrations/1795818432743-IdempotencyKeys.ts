import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 22 (point 4): the Idempotency-Keys of creating operations, per API key, with the first answer to replay.
 * Owned by @ws/auth (IdempotencyKeys); rows past 24 hours are removed by maintenance.expire-idempotency-keys.
 */
export class IdempotencyKeys1795818432743 implements MigrationInterface {
    name = 'IdempotencyKeys1795818432743';

    public async up(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            CREATE TABLE "idempotency_keys" (
                "api_key_id" uuid NOT NULL,
                "key" text NOT NULL,
                "operation" text NOT NULL,
                "request_sha256" text NOT NULL,
                "claim" uuid NOT NULL,
                "claimed_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                "status_code" integer,
                "response_body" text,
                "created_at" TIMESTAMP WITH TIME ZONE NOT NULL,
                CONSTRAINT "PK_913ded668c974d019eb0196e639" PRIMARY KEY ("api_key_id", "key")
            )
        `);
        await queryRunner.query(`
            CREATE INDEX "IDX_5e72f040fdc5efc8eef52a388c" ON "idempotency_keys" ("created_at")
        `);
        await queryRunner.query(`
            ALTER TABLE "idempotency_keys"
            ADD CONSTRAINT "FK_df33199f3504b21d6dfc3ae686d" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE CASCADE ON UPDATE NO ACTION
        `);
    }

    public async down(queryRunner: QueryRunner): Promise<void> {
        await queryRunner.query(`
            ALTER TABLE "idempotency_keys" DROP CONSTRAINT "FK_df33199f3504b21d6dfc3ae686d"
        `);
        await queryRunner.query(`
            DROP INDEX "public"."IDX_5e72f040fdc5efc8eef52a388c"
        `);
        await queryRunner.query(`
            DROP TABLE "idempotency_keys"
        `);
    }
}
