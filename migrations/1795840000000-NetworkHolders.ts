import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `network_holders`: pre-made network namespaces (docs/decisions/workspaces.md, "Network holders"). Each row is a
 * small running container on a server's workspace network that publishes one port set; a launch claims a free one
 * (workspace_id set, FOR UPDATE SKIP LOCKED) and its container joins that namespace instead of making its own. The
 * row is the claim: a retried launch finds its holder by workspace_id, and the reconciler removes a claimed holder
 * whose workspace is no longer live.
 */
export class NetworkHolders1795840000000 implements MigrationInterface {
  name = 'NetworkHolders1795840000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE network_holders (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      server_id uuid NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
      pool_key text NOT NULL,
      container_id text NOT NULL,
      container_ip text,
      host_ports jsonb NOT NULL,
      workspace_id uuid UNIQUE,
      claimed_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query('CREATE INDEX network_holders_free ON network_holders (server_id, pool_key) WHERE workspace_id IS NULL');
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE network_holders');
  }
}
