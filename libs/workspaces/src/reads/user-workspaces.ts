import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { rawQuery } from '@ws/database';
import { Server } from '@ws/servers';
import type { UserWorkspaceSummary } from '@ws/users';
import { LIVE_STATUSES, Workspace } from '../workspace.entity';

/** The live workspaces of users: for delete_user's rules and for get_user / get_users' answers. */
@Injectable()
export class UserWorkspaces {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Each user's live workspaces, whole (with the server), oldest first. */
  async liveOf(userIds: string[]): Promise<Map<string, Workspace[]>> {
    const result = new Map<string, Workspace[]>(userIds.map((id) => [id, []]));
    if (userIds.length === 0) return result;
    // Raw select with the server joined (see rawQuery): every column of both, hydrated by hand.
    const rows = await rawQuery<WorkspaceWithServerRow>(
      this.db,
      `SELECT w.*, ${SERVER_COLUMNS} FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id
        WHERE w.user_id = ANY($1) AND w.status = ANY($2) ORDER BY w.start_date ASC`,
      [[...new Set(userIds)], LIVE_STATUSES],
    );
    for (const row of rows) result.get(row.user_id as string)?.push(workspaceFromRow(row));
    return result;
  }

  /**
   * Each user's live workspaces as get_user and get_users list them, oldest first: only the columns the
   * response shows (parsing a row costs per column, and a workspace with its server has over forty).
   */
  async liveSummariesOf(userIds: string[]): Promise<Map<string, UserWorkspaceSummary[]>> {
    const result = new Map<string, UserWorkspaceSummary[]>(userIds.map((id) => [id, []]));
    if (userIds.length === 0) return result;
    const rows = await rawQuery<WorkspaceSummaryRow>(
      this.db,
      `SELECT w.id, w.user_id, w.start_date, w.keepalive_date, w.expiration_date, w.host_ports, s.id AS s_id, s.hostname AS s_hostname
        FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id
        WHERE w.user_id = ANY($1) AND w.status = ANY($2) ORDER BY w.start_date ASC`,
      [[...new Set(userIds)], LIVE_STATUSES],
    );
    for (const r of rows) {
      result.get(r.user_id)?.push({
        id: r.id, startDate: r.start_date, keepaliveDate: r.keepalive_date, expirationDate: r.expiration_date, hostPorts: r.host_ports,
        server: r.s_id === null ? null : { id: r.s_id, hostname: r.s_hostname as string },
      });
    }
    return result;
  }
}

/** The server's columns under an `s_` prefix, beside `w.*`. */
const SERVER_COLUMNS = [
  'id', 'hostname', 'docker_endpoint', 'tls_ca_path', 'tls_cert_path', 'tls_key_path', 'publish_host', 'zone_id', 'enabled', 'cores', 'memory', 'provider', 'created_at',
].map((c) => `s.${c} AS s_${c}`).join(', ');

interface WorkspaceWithServerRow {
  [column: string]: unknown;
  user_id: string | null;
  s_id: string | null;
}

interface WorkspaceSummaryRow {
  id: string; user_id: string; start_date: Date; keepalive_date: Date; expiration_date: Date;
  host_ports: Record<string, number>; s_id: string | null; s_hostname: string | null;
}

/** Numeric and bigint columns come back as strings (see @ws/database/columns). */
const toNumber = (v: unknown) => (v === null ? null : Number(v));

function workspaceFromRow(r: WorkspaceWithServerRow): Workspace {
  const server = r.s_id === null ? null : Object.assign(new Server(), {
    id: r.s_id, hostname: r.s_hostname, dockerEndpoint: r.s_docker_endpoint, tlsCaPath: r.s_tls_ca_path, tlsCertPath: r.s_tls_cert_path,
    tlsKeyPath: r.s_tls_key_path, publishHost: r.s_publish_host, zoneId: r.s_zone_id, enabled: r.s_enabled, cores: toNumber(r.s_cores),
    memory: toNumber(r.s_memory), provider: r.s_provider, createdAt: r.s_created_at,
  });
  return Object.assign(new Workspace(), {
    id: r.id, userId: r.user_id, imageId: r.image_id, serverId: r.server_id, server, status: r.status, operationalMessage: r.operational_message,
    operationalProgress: r.operational_progress, containerId: r.container_id, containerIp: r.container_ip, hostPorts: r.host_ports,
    cores: toNumber(r.cores), memory: toNumber(r.memory), token: r.token, viewOnlyToken: r.view_only_token, sessionTokenId: r.session_token_id,
    launchOptions: r.launch_options, shareId: r.share_id, sharingEnabled: r.sharing_enabled, environment: r.environment,
    persistentProfileMode: r.persistent_profile_mode, isPersistentProfile: r.is_persistent_profile, startDate: r.start_date,
    keepaliveDate: r.keepalive_date, expirationDate: r.expiration_date, destroyedAt: r.destroyed_at, destroyReason: r.destroy_reason,
    createdAt: r.created_at, updatedAt: r.updated_at,
  });
}
