import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { ApiError, ErrorCode, parseId, toWireId } from '@ws/common';
import { EgressConnection, EgressCredential, EgressGateway, EgressProvider } from './egress.entities';
import { SIDECAR_PROVIDER_TYPES } from './egress-sidecar-config';

export interface EgressReservationRequest {
  /** The workspace the connection is for (its row may be inserted later in the same transaction). */
  workspaceId: string;
  /** The workspace's user; null for none (then only the image's credentials apply). */
  userId: string | null;
  groupIds: readonly string[];
  imageId: string;
  /** As the request gave it (wire or dashed id). */
  gatewayId: string;
}

/** What the container needs to join the gateway: the credential (secrets sealed as stored from `reserve`; in clear after EgressSecrets.reveal), the gateway and its provider. */
export interface EgressReservation {
  credential: EgressCredential;
  gateway: EgressGateway;
  provider: EgressProvider;
}

/** Most specific first: a user's own credential, then a group's, then the image's. */
const OWNER_RANK = (c: EgressCredential): number => (c.userId ? 0 : c.groupId ? 1 : 2);

/**
 * The live connections of egress credentials: one `egress_connections` row per workspace. The launch reserves
 * inside its transaction (before it records the workspace) and the destroy path releases; both take the
 * caller's transaction so the row commits or rolls back with the workspace's.
 */
@Injectable()
export class EgressConnections {
  /**
   * Picks a usable credential for the gateway (enabled, of the gateway's provider, attached to the user, one of
   * their groups or the image, allowing the gateway) with room under its limit, and records the connection.
   * 400 unknown gateway, 403 no usable credential, 409 every usable credential at its limit.
   */
  async reserve(tx: EntityManager, request: EgressReservationRequest): Promise<EgressReservation> {
    const gatewayId = parseId(request.gatewayId);
    const gateway = gatewayId ? await tx.getRepository(EgressGateway).findOne({ where: { id: gatewayId }, relations: { provider: true } }) : null;
    if (!gateway) throw ApiError.invalidId('egress_gateway_id', request.gatewayId);
    const provider = gateway.provider as EgressProvider;

    // Locked in id order (no deadlock between launches); the counts below are read after the locks, so they see
    // every connection a launch that held a lock before us committed.
    const candidates = await tx.getRepository(EgressCredential)
      .createQueryBuilder('c')
      .where('c.provider_id = :providerId AND c.enabled', { providerId: provider.id })
      .andWhere('(c.user_id = :userId OR c.group_id = ANY(:groupIds) OR c.image_id = :imageId)', {
        userId: request.userId, groupIds: [...request.groupIds], imageId: request.imageId,
      })
      .andWhere('(c.allow_all_gateways OR EXISTS (SELECT 1 FROM egress_credential_gateways s WHERE s.credential_id = c.id AND s.gateway_id = :gatewayId))', { gatewayId: gateway.id })
      .orderBy('c.id')
      .setLock('pessimistic_write')
      .getMany();
    if (candidates.length === 0) {
      throw new ApiError(
        ErrorCode.Forbidden,
        `No enabled egress credential of the provider ${provider.name} allows the gateway ${gateway.name} for this user, their groups or the image`,
      );
    }
    const counts = new Map(
      ((await tx.query('SELECT credential_id, count(*)::int AS count FROM egress_connections WHERE credential_id = ANY($1) GROUP BY credential_id', [
        candidates.map((c) => c.id),
      ])) as Array<{ credential_id: string; count: number }>).map((r) => [r.credential_id, r.count]),
    );
    const ranked = [...candidates].sort((a, b) => OWNER_RANK(a) - OWNER_RANK(b) || a.createdAt.getTime() - b.createdAt.getTime());
    const credential = ranked.find((c) => !c.limitActiveConnections || (counts.get(c.id) ?? 0) < (c.activeConnectionLimit ?? 0));
    if (!credential) {
      const limits = ranked.map((c) => `${c.name}: ${counts.get(c.id) ?? 0} of ${c.activeConnectionLimit}`).join(', ');
      throw new ApiError(ErrorCode.Conflict, `Egress connection limit reached for the gateway ${gateway.name} (${limits})`);
    }
    await tx.getRepository(EgressConnection).insert({ workspaceId: request.workspaceId, credentialId: credential.id, gatewayId: gateway.id });
    return { credential, gateway, provider };
  }

  /** Ends the workspace's connection, if any; idempotent. Answers whether there was one. */
  async release(tx: EntityManager, workspaceId: string): Promise<boolean> {
    const result = await tx.getRepository(EgressConnection).delete({ workspaceId });
    return (result.affected ?? 0) > 0;
  }
}

/**
 * The environment a workspace container gets for its egress: what it joined (provider, gateway). The secret of a
 * provider type that runs in a sidecar (all four today) is the sidecar's only (egress-sidecar-config.ts).
 */
export function egressEnvironment(reservation: EgressReservation): Record<string, string> {
  const { credential: c, gateway: g, provider: p } = reservation;
  const env: Record<string, string | null> = {
    EGRESS_PROVIDER_TYPE: p.type,
    EGRESS_PROVIDER_NAME: p.name,
    EGRESS_GATEWAY_ID: toWireId(g.id),
    EGRESS_GATEWAY_NAME: g.name,
    EGRESS_GATEWAY_ENDPOINT: g.endpoint,
    EGRESS_GATEWAY_CONFIG: JSON.stringify(g.config),
    EGRESS_USERNAME: c.username,
    EGRESS_PASSWORD: c.password,
    EGRESS_VPN_PRIVATE_KEY: c.vpnPrivateKey,
    EGRESS_MESH_KEY: c.meshKey,
    EGRESS_CUSTOM_CREDENTIAL: c.customCredential,
  };
  // A provider that runs in a sidecar gets its secret there (egress-sidecar-config.ts), never in the desktop.
  if (SIDECAR_PROVIDER_TYPES.includes(p.type)) for (const secret of ['EGRESS_PASSWORD', 'EGRESS_VPN_PRIVATE_KEY', 'EGRESS_MESH_KEY', 'EGRESS_CUSTOM_CREDENTIAL']) delete env[secret];
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== null));
}
