import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Signed webhooks (issue 22): endpoints, their message queue and delivery attempts, the position of the webhooks'
 * feed in the users' outbox, and that outbox (user_events, written with each change of a named user). Inserts into
 * user_events and webhook_messages notify `user_event` and `webhook_message` (sent at commit), which wake the worker.
 */
export class Webhooks1795818531578 implements MigrationInterface {
  name = 'Webhooks1795818531578';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE "user_events" (
        "id" BIGSERIAL NOT NULL,
        "user_id" uuid NOT NULL,
        "type" text NOT NULL,
        "payload" jsonb NOT NULL DEFAULT '{}',
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_22f49067e87f2c8a3fff76543d1" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE INDEX "IDX_92bc186e86e99509d718dfb360" ON "user_events" ("created_at")`);
    await q.query(`
      CREATE TABLE "webhooks" (
        "id" uuid NOT NULL,
        "url" text NOT NULL,
        "events" text array NOT NULL DEFAULT '{}',
        "description" text,
        "enabled" boolean NOT NULL DEFAULT true,
        "disabled_reason" text,
        "secret" text NOT NULL,
        "previous_secret" text,
        "previous_secret_until" TIMESTAMP WITH TIME ZONE,
        "lease_owner" text,
        "lease_until" TIMESTAMP WITH TIME ZONE,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_9e8795cfc899ab7bdaa831e8527" PRIMARY KEY ("id")
      )
    `);
    await q.query(`
      CREATE TABLE "webhook_messages" (
        "id" BIGSERIAL NOT NULL,
        "webhook_id" uuid NOT NULL,
        "event_type" text NOT NULL,
        "ordering_key" text NOT NULL,
        "body" text NOT NULL,
        "state" text NOT NULL DEFAULT 'pending',
        "attempts" integer NOT NULL DEFAULT '0',
        "next_attempt_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        "last_error" text,
        "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        "finished_at" TIMESTAMP WITH TIME ZONE,
        CONSTRAINT "PK_526e8e1655924920adc4cd30dcd" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE INDEX "IDX_webhook_messages_created" ON "webhook_messages" ("created_at")`);
    await q.query(`CREATE INDEX "IDX_webhook_messages_queue" ON "webhook_messages" ("webhook_id", "state", "ordering_key", "id")`);
    await q.query(`CREATE INDEX "IDX_webhook_messages_due" ON "webhook_messages" ("state", "next_attempt_at")`);
    await q.query(`
      CREATE TABLE "webhook_attempts" (
        "id" BIGSERIAL NOT NULL,
        "webhook_id" uuid NOT NULL,
        "message_id" bigint NOT NULL,
        "event_type" text NOT NULL,
        "attempt" integer NOT NULL,
        "status_code" integer,
        "duration_ms" integer NOT NULL,
        "succeeded" boolean NOT NULL,
        "error" text,
        "attempted_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_2de7e7887ad97de459adab62638" PRIMARY KEY ("id")
      )
    `);
    await q.query(`CREATE INDEX "IDX_webhook_attempts_created" ON "webhook_attempts" ("attempted_at")`);
    await q.query(`CREATE INDEX "IDX_webhook_attempts_webhook" ON "webhook_attempts" ("webhook_id", "id")`);
    await q.query(`
      CREATE TABLE "webhook_feed_cursors" (
        "feed" text NOT NULL,
        "last_event_id" bigint NOT NULL DEFAULT '0',
        "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_aa631827c8a886aab13a65468f4" PRIMARY KEY ("feed")
      )
    `);
    await q.query(`
      ALTER TABLE "webhook_messages" ADD CONSTRAINT "FK_0f6e6f4b77cceb929106add171b"
      FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE NO ACTION
    `);
    await q.query(`
      ALTER TABLE "webhook_attempts" ADD CONSTRAINT "FK_7aeddde4d8d3a36841e6da6cbf3"
      FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE NO ACTION
    `);
    await q.query(`
      CREATE FUNCTION notify_user_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('user_event', ''); RETURN NULL; END $$
    `);
    await q.query(`CREATE TRIGGER user_events_inserted AFTER INSERT ON user_events FOR EACH STATEMENT EXECUTE FUNCTION notify_user_event()`);
    await q.query(`
      CREATE FUNCTION notify_webhook_message() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('webhook_message', ''); RETURN NULL; END $$
    `);
    await q.query(`CREATE TRIGGER webhook_messages_inserted AFTER INSERT ON webhook_messages FOR EACH STATEMENT EXECUTE FUNCTION notify_webhook_message()`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER webhook_messages_inserted ON webhook_messages');
    await q.query('DROP FUNCTION notify_webhook_message');
    await q.query('DROP TRIGGER user_events_inserted ON user_events');
    await q.query('DROP FUNCTION notify_user_event');
    await q.query('DROP TABLE "webhook_feed_cursors"');
    await q.query('DROP TABLE "webhook_attempts"');
    await q.query('DROP TABLE "webhook_messages"');
    await q.query('DROP TABLE "webhooks"');
    await q.query('DROP TABLE "user_events"');
  }
}
