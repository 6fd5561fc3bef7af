import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The workspace outbox without a deployment-wide lock on its writers (issue 24, point 3). Writers insert events
 * with ids in any commit order; the relay's sequencer gives each committed event a delivery position (`seq`), in
 * id order, one batch at a time (its single row, `workspace_event_sequencer`, is the only lock, off the hot path).
 * Subscribers' cursors count positions: existing events and cursors keep their ids as positions, and the
 * sequencer starts above every id drawn so far. Writers no longer notify either (PostgreSQL serialises the
 * commits of notifying transactions): the relay polls for unsequenced events instead (a partial index).
 */
export class OutboxWithoutGlobalLock1795823026733 implements MigrationInterface {
  name = 'OutboxWithoutGlobalLock1795823026733';

  public async up(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER workspace_events_inserted ON workspace_events');
    await q.query('DROP FUNCTION notify_workspace_event');
    await q.query('ALTER TABLE "workspace_events" ADD "seq" bigint');
    await q.query('UPDATE "workspace_events" SET "seq" = "id"');
    await q.query('CREATE UNIQUE INDEX "IDX_workspace_events_seq" ON "workspace_events" ("seq")');
    await q.query('CREATE INDEX "IDX_workspace_events_unsequenced" ON "workspace_events" ("id") WHERE seq IS NULL');
    await q.query(`
      CREATE TABLE "workspace_event_sequencer" (
        "id" smallint NOT NULL,
        "last_seq" bigint NOT NULL,
        CONSTRAINT "PK_workspace_event_sequencer" PRIMARY KEY ("id")
      )
    `);
    await q.query(`
      INSERT INTO "workspace_event_sequencer" ("id", "last_seq")
      SELECT 1, GREATEST(
        (SELECT COALESCE(MAX(id), 0) FROM workspace_events),
        (SELECT COALESCE(MAX(last_event_id), 0) FROM workspace_event_cursors),
        (SELECT last_value FROM workspace_events_id_seq))
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE "workspace_event_sequencer"');
    await q.query('DROP INDEX "public"."IDX_workspace_events_unsequenced"');
    await q.query('DROP INDEX "public"."IDX_workspace_events_seq"');
    await q.query('ALTER TABLE "workspace_events" DROP COLUMN "seq"');
    await q.query(`
      CREATE FUNCTION notify_workspace_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('workspace_event', ''); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER workspace_events_inserted AFTER INSERT ON workspace_events
      FOR EACH STATEMENT EXECUTE FUNCTION notify_workspace_event()
    `);
  }
}
