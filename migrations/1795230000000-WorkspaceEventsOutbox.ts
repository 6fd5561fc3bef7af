import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The workspace lifecycle outbox (written with each state change, in its transaction), each subscriber's
 * position in it, and the record of deliveries. A statement that adds events notifies `workspace_event`
 * (sent at commit) so the worker's relay runs at once instead of at its next scheduled pass.
 */
export class WorkspaceEventsOutbox1795230000000 implements MigrationInterface {
  name = 'WorkspaceEventsOutbox1795230000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "workspace_events" (
        "id" BIGSERIAL NOT NULL,
        "workspace_id" uuid NOT NULL,
        "type" text NOT NULL,
        "payload" jsonb NOT NULL DEFAULT '{}',
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_7bc9b9de4cfa7286bfbe744a663" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE INDEX "IDX_cbffd52e485609efb64c1b7b60" ON "workspace_events" ("created_at")`);
    await q.query(`CREATE INDEX "IDX_8babb942b09b40a2e729b54b7a" ON "workspace_events" ("workspace_id", "id")`);
    await q.query(`
      CREATE TABLE "workspace_event_cursors" (
        "subscriber" text NOT NULL,
        "last_event_id" bigint NOT NULL DEFAULT '0',
        "attempts" integer NOT NULL DEFAULT '0',
        "retry_after" TIMESTAMP WITH TIME ZONE,
        "last_error" text,
        "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_1974d8776a4948ca20f38fdf4c3" PRIMARY KEY ("subscriber")
      )
    `);
    await q.query(`
      CREATE TABLE "workspace_event_deliveries" (
        "id" BIGSERIAL NOT NULL,
        "subscriber" text NOT NULL,
        "event_id" bigint NOT NULL,
        "workspace_id" uuid NOT NULL,
        "failed" boolean NOT NULL DEFAULT false,
        "delivered_by" text NOT NULL,
        "delivered_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_8ef573fa7ca71e2d48f6d5b39db" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE INDEX "IDX_af93a39396e8290e3d85dc4ace" ON "workspace_event_deliveries" ("subscriber", "event_id")`);
    await q.query(`
      CREATE FUNCTION notify_workspace_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('workspace_event', ''); RETURN NULL; END $$
    `);
    await q.query(`
      CREATE TRIGGER workspace_events_inserted AFTER INSERT ON workspace_events
      FOR EACH STATEMENT EXECUTE FUNCTION notify_workspace_event()
    `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER workspace_events_inserted ON workspace_events');
    await q.query('DROP FUNCTION notify_workspace_event');
    await q.query('DROP INDEX "public"."IDX_af93a39396e8290e3d85dc4ace"');
    await q.query('DROP TABLE "workspace_event_deliveries"');
    await q.query('DROP TABLE "workspace_event_cursors"');
    await q.query('DROP INDEX "public"."IDX_8babb942b09b40a2e729b54b7a"');
    await q.query('DROP INDEX "public"."IDX_cbffd52e485609efb64c1b7b60"');
    await q.query('DROP TABLE "workspace_events"');
  }
}
