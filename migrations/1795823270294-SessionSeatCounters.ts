import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * License seats without a deployment-wide advisory lock or a count of the workspaces table (issue 24, point 3).
 * Live workspaces (every status but deleted) = `session_seats.admitted` - the sum of `session_seats_freed`,
 * both kept by a trigger on workspaces in the transaction of the row's own change, so they cannot drift (raw SQL
 * included; a TRUNCATE resets them). A reservation locks the admitted row only (countLiveWorkspaces); a workspace
 * leaving the live set adds to one of 16 freed stripes (by its id), so destroys never wait for launches.
 */
export class SessionSeatCounters1795823270294 implements MigrationInterface {
  name = 'SessionSeatCounters1795823270294';

  public async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE TABLE "session_seats" ("id" smallint NOT NULL, "admitted" bigint NOT NULL, CONSTRAINT "PK_session_seats" PRIMARY KEY ("id"))');
    await q.query('CREATE TABLE "session_seats_freed" ("stripe" smallint NOT NULL, "freed" bigint NOT NULL, CONSTRAINT "PK_session_seats_freed" PRIMARY KEY ("stripe"))');
    await q.query(`INSERT INTO "session_seats" ("id", "admitted") SELECT 1, count(*) FROM workspaces WHERE status <> 'deleted'`);
    await q.query('INSERT INTO "session_seats_freed" ("stripe", "freed") SELECT g, 0 FROM generate_series(0, 15) g');
    await q.query(`
      CREATE FUNCTION session_seats_track() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          IF NEW.status <> 'deleted' THEN UPDATE session_seats SET admitted = admitted + 1 WHERE id = 1; END IF;
        ELSIF TG_OP = 'UPDATE' THEN
          IF OLD.status <> 'deleted' AND NEW.status = 'deleted' THEN
            UPDATE session_seats_freed SET freed = freed + 1 WHERE stripe = abs(hashtext(OLD.id::text)) % 16;
          ELSIF OLD.status = 'deleted' AND NEW.status <> 'deleted' THEN
            UPDATE session_seats SET admitted = admitted + 1 WHERE id = 1;
          END IF;
        ELSIF TG_OP = 'DELETE' THEN
          IF OLD.status <> 'deleted' THEN UPDATE session_seats_freed SET freed = freed + 1 WHERE stripe = abs(hashtext(OLD.id::text)) % 16; END IF;
        END IF;
        RETURN NULL;
      END $$
    `);
    await q.query('CREATE TRIGGER workspaces_session_seats_ins AFTER INSERT ON workspaces FOR EACH ROW EXECUTE FUNCTION session_seats_track()');
    await q.query('CREATE TRIGGER workspaces_session_seats_upd AFTER UPDATE OF status ON workspaces FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION session_seats_track()');
    await q.query('CREATE TRIGGER workspaces_session_seats_del AFTER DELETE ON workspaces FOR EACH ROW EXECUTE FUNCTION session_seats_track()');
    await q.query(`
      CREATE FUNCTION session_seats_reset() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN UPDATE session_seats SET admitted = 0; UPDATE session_seats_freed SET freed = 0; RETURN NULL; END $$
    `);
    await q.query('CREATE TRIGGER workspaces_session_seats_truncate AFTER TRUNCATE ON workspaces FOR EACH STATEMENT EXECUTE FUNCTION session_seats_reset()');
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER workspaces_session_seats_truncate ON workspaces');
    await q.query('DROP TRIGGER workspaces_session_seats_del ON workspaces');
    await q.query('DROP TRIGGER workspaces_session_seats_upd ON workspaces');
    await q.query('DROP TRIGGER workspaces_session_seats_ins ON workspaces');
    await q.query('DROP FUNCTION session_seats_reset');
    await q.query('DROP FUNCTION session_seats_track');
    await q.query('DROP TABLE "session_seats_freed"');
    await q.query('DROP TABLE "session_seats"');
  }
}
