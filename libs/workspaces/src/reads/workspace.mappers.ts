import { formatTimestamp, toWireId } from '@ws/common';
import type { ClientSettings } from '@ws/groups';
import { toImageRef, portMapOf } from '@ws/images';
import type { Image } from '@ws/images';
import type { Server } from '@ws/servers';
import type { Workspace, WorkspaceStatus } from '../workspace.entity';

/** The spec shows starting, running and stopped; a failed workspace reads as stopped (its message says why). */
export function operationalStatus(status: WorkspaceStatus): string {
  switch (status) {
    case 'starting':
    case 'running':
    case 'stopping':
      return status;
    case 'failed':
    case 'deleted':
      return 'stopped';
    default: {
      const unreachable: never = status;
      return String(unreachable);
    }
  }
}

/** The image fields the wire mapping reads (get_workspaces selects only these). */
export const MAPPED_IMAGE_FIELDS = ['id', 'name', 'imageSrc', 'friendlyName', 'kind'] as const satisfies ReadonlyArray<keyof Image>;
export type MappedImage = Pick<Image, (typeof MAPPED_IMAGE_FIELDS)[number] | 'attributes'>;
/** The server fields the wire mapping reads, health included. */
export const MAPPED_SERVER_FIELDS = ['id', 'hostname', 'publishHost', 'provider', 'zoneId', 'health', 'healthReason', 'healthCheckedAt', 'downSince'] as const satisfies ReadonlyArray<keyof Server>;
export type MappedServer = Pick<Server, (typeof MAPPED_SERVER_FIELDS)[number]>;
/** The workspace's own fields the wire mapping reads (get_workspaces selects only these). */
export const MAPPED_WORKSPACE_FIELDS = [
  'id', 'userId', 'imageId', 'serverId', 'serverConnection', 'hostPorts', 'containerId', 'containerIp', 'startDate', 'keepaliveDate', 'expirationDate',
  'token', 'viewOnlyToken', 'shareId', 'cores', 'memory', 'status', 'operationalMessage', 'isPersistentProfile', 'persistentProfileMode', 'clientSettingsOverride',
] as const satisfies ReadonlyArray<keyof Workspace>;
/** A workspace as the mappers read it: of its own columns, and of its image and server, what the wire shows. */
export type MappedWorkspace = Pick<Workspace, (typeof MAPPED_WORKSPACE_FIELDS)[number]> & { image?: MappedImage | null; server?: MappedServer | null };

export const connectPath = (workspaceId: string, userId: string, jwt: string) => `/#/connect/workspace/${toWireId(workspaceId)}/${toWireId(userId)}/${jwt}`;
export const joinPath = (shareId: string, userId: string, jwt: string) => `/#/connect/join/${shareId}/${toWireId(userId)}/${jwt}`;

/** Websocket path of a workspace service behind the api's stream gateway. */
export const streamPath = (workspaceId: string, service: string) => `api/stream/${toWireId(workspaceId)}/${service}`;

/** The spec's Workspace object; `workspace.image` and `workspace.server` must be loaded. */
export function toWorkspaceResponse(w: MappedWorkspace, clientSettings: ClientSettings) {
  const image = w.image;
  const server = w.server ?? null;
  const direct = w.serverConnection?.mode === 'direct' ? w.serverConnection : null;
  const portMap = image ? portMapOf(image) : { vnc: '5900/tcp' };
  return {
    workspace_id: toWireId(w.id),
    user_id: toWireId(w.userId),
    image_id: toWireId(w.imageId),
    image: image ? toImageRef(image) : null,
    server_id: toWireId(w.serverId),
    // A VNC server image's workspace is hosted by that server itself (no Docker host, no container).
    host: direct?.host ?? server?.publishHost ?? null,
    hostname: direct?.host ?? server?.hostname ?? null,
    port: direct?.port ?? w.hostPorts.vnc ?? null,
    container_id: w.containerId,
    container_ip: w.containerIp,
    start_date: formatTimestamp(w.startDate),
    keepalive_date: formatTimestamp(w.keepaliveDate),
    expiration_date: formatTimestamp(w.expirationDate),
    token: w.token,
    view_only_token: w.viewOnlyToken,
    share_id: w.shareId,
    cores: w.cores,
    memory: w.memory,
    operational_status: operationalStatus(w.status),
    // Not in the contract's table: what the status says beside its name ("Running"; an egress tunnel that is down).
    operational_message: w.operationalMessage,
    is_persistent_profile: w.isPersistentProfile,
    persistent_profile_mode: w.persistentProfileMode,
    point_of_presence: null,
    port_map: portMapResponse(w, portMap),
    client_settings: withOverride(clientSettings, w),
  };
}

/**
 * The workspace's services and their gateway paths: the image's port_map entries, and `uploads` for every
 * container workspace (files move through `docker exec`, so every container image has them; a server session's
 * does not). An image that names no `uploads` port gets port 0: the route is the api's, no container port.
 */
export function portMapResponse(w: Pick<Workspace, 'id' | 'serverConnection'> & { image?: Pick<Image, 'kind'> | null }, portMap: Record<string, string>) {
  const services: Record<string, { port: number; path: string }> = Object.fromEntries(
    Object.entries(portMap).map(([name, spec]) => [name, { port: Number(spec.split('/')[0]), path: streamPath(w.id, name) }]),
  );
  if (!services.uploads && !w.serverConnection && w.image?.kind !== 'server') services.uploads = { port: 0, path: streamPath(w.id, 'uploads') };
  return services;
}

/** The effective client settings of one workspace: its owner's groups', overlaid with the workspace's own override. */
export function withOverride(clientSettings: ClientSettings, w: Pick<Workspace, 'clientSettingsOverride'>): ClientSettings {
  return w.clientSettingsOverride && Object.keys(w.clientSettingsOverride).length > 0 ? { ...clientSettings, ...w.clientSettingsOverride } : clientSettings;
}

/**
 * What a live workspace on a server the health check marked down reports, derived at read time from the server's row
 * (no workspace row is rewritten; the message clears when the host answers again). Null while the server is up.
 */
export function hostUnreachableMessage(server: Pick<Server, 'hostname' | 'health' | 'healthReason' | 'downSince'> | null | undefined): string | null {
  if (!server || server.health !== 'down') return null;
  const since = server.downSince ? ` since ${formatTimestamp(server.downSince)}` : '';
  return `The workspace's host ${server.hostname} is unreachable${since} (${server.healthReason ?? 'no answer'}); the workspace is kept and is back when its host answers`;
}

/** The server's health fields, beside the contract's server object (docs/decisions/operations.md "Host health"). */
export function serverHealthOf(server: Pick<Server, 'health' | 'healthReason' | 'healthCheckedAt' | 'downSince'>) {
  return {
    health: server.health,
    health_reason: server.healthReason,
    health_checked_at: formatTimestamp(server.healthCheckedAt),
    down_since: formatTimestamp(server.downSince),
  };
}

/**
 * An item of get_workspaces: the Workspace object plus its server (with its health) and user, and the
 * operational_message get_workspace_status would give (the host's unreachability first).
 */
export function toWorkspaceListItem(w: MappedWorkspace, clientSettings: ClientSettings, username: string | null, zoneName: string | null) {
  return {
    ...toWorkspaceResponse(w, clientSettings),
    server: w.server ? { port: w.hostPorts.vnc ?? null, hostname: w.server.hostname, zone_name: zoneName, provider: w.server.provider, ...serverHealthOf(w.server) } : null,
    user: { username },
    operational_message: hostUnreachableMessage(w.server) ?? w.operationalMessage ?? null,
  };
}
