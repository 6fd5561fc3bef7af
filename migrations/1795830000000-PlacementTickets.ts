import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `placement_tickets`: each placement draws one, and servers with the same room take launches in turn by it
 * (libs/workspaces/src/launch/placement.ts). A sequence, because its values are seen by every transaction at once,
 * committed or not. CYCLE: it only needs to turn, never to end.
 */
export class PlacementTickets1795830000000 implements MigrationInterface {
  name = 'PlacementTickets1795830000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE SEQUENCE placement_tickets AS bigint MINVALUE 0 START 0 CYCLE');
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP SEQUENCE placement_tickets');
  }
}
