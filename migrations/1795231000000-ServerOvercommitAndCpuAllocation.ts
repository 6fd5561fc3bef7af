import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Servers offer cores and memory times an overcommit factor (placement), and name the CPU allocation method
 * images with `Inherit` get. Existing servers take the defaults: 4× cores, 1× memory, Quotas (as before).
 */
export class ServerOvercommitAndCpuAllocation1795231000000 implements MigrationInterface {
  name = 'ServerOvercommitAndCpuAllocation1795231000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "servers" ADD "cpu_overcommit" numeric NOT NULL DEFAULT '4'`);
    await q.query(`ALTER TABLE "servers" ADD "memory_overcommit" numeric NOT NULL DEFAULT '1'`);
    await q.query(`ALTER TABLE "servers" ADD "cpu_allocation_method" text NOT NULL DEFAULT 'Quotas'`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE "servers" DROP COLUMN "cpu_allocation_method"');
    await q.query('ALTER TABLE "servers" DROP COLUMN "memory_overcommit"');
    await q.query('ALTER TABLE "servers" DROP COLUMN "cpu_overcommit"');
  }
}
