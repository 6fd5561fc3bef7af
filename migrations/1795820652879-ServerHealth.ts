import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Host health (issue 24, point 2): the worker's periodic check marks each enabled server up or down, with the
 * reason, when it last checked, and since when it is down. Existing servers start up (placement as before).
 */
export class ServerHealth1795820652879 implements MigrationInterface {
  name = 'ServerHealth1795820652879';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "servers" ADD "health" text NOT NULL DEFAULT 'up'`);
    await q.query('ALTER TABLE "servers" ADD "health_reason" text');
    await q.query('ALTER TABLE "servers" ADD "health_checked_at" TIMESTAMP WITH TIME ZONE');
    await q.query('ALTER TABLE "servers" ADD "down_since" TIMESTAMP WITH TIME ZONE');
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE "servers" DROP COLUMN "down_since"');
    await q.query('ALTER TABLE "servers" DROP COLUMN "health_checked_at"');
    await q.query('ALTER TABLE "servers" DROP COLUMN "health_reason"');
    await q.query('ALTER TABLE "servers" DROP COLUMN "health"');
  }
}
