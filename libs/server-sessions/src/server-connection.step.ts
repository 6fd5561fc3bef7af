import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { ApiError, ErrorCode, randomSecret, toWireId } from '@ws/common';
import { LaunchOrder, LaunchStepProvider } from '@ws/workspaces';
import type { IssuedLaunch, LaunchStep, ReservedRowFields, ResolvedLaunch, WorkspaceServerConnection } from '@ws/workspaces';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';

/**
 * A server image's connection (WorkspaceServerSessions.resolve: connection_info and rdp_client_type, each a clear
 * 400); a container image takes neither. A server workspace never comes from staging and joins no egress gateway.
 * Recorded (reserve) with its password sealed to the workspace id, and a relay's own key.
 */
/** A server image's connection and its plaintext password (sealed when recorded); null for a container image. */
type ServerSession = { connection: WorkspaceServerConnection; password: string } | null;

@Injectable()
@LaunchStepProvider()
export class ServerConnectionStep implements LaunchStep<ServerSession> {
  readonly name = 'server connection';
  readonly order = LaunchOrder.ServerConnection;

  constructor(private readonly serverSessions: WorkspaceServerSessions) {}

  async run(launch: ResolvedLaunch): Promise<ServerSession> {
    const { request, image } = launch;
    if (image.kind !== 'server') {
      if (request.connectionInfo) throw new ApiError(ErrorCode.InvalidRequest, 'connection_info applies to RDP, VNC and SSH server images, not to container images');
      if (request.rdpClientType) throw new ApiError(ErrorCode.InvalidRequest, 'rdp_client_type applies to RDP server images, not to container images');
      return null;
    }
    // What only a container of the user's own takes is refused, never ignored.
    const containerOnly = [
      ['egress_gateway_id', request.egressGatewayId], ['environment', Object.keys(request.environment).length > 0 ? request.environment : undefined],
      ['container_network', request.containerNetwork],
    ].find(([, value]) => value);
    if (containerOnly) throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is a server image; ${containerOnly[0]} applies to container images`);
    const session = await this.serverSessions.resolve(image, { connection_info: request.connectionInfo, rdp_client_type: request.rdpClientType }, launch.user.username);
    // A VNC server reached directly has no container, so no Docker host and none of its room.
    launch.needsDockerHost = session.connection.mode !== 'direct';
    return session;
  }

  /** The server session's columns of the row: nothing to lock, but the password is sealed to the id minted for the record. */
  async reserve(_tx: EntityManager, launch: IssuedLaunch, session: ServerSession): Promise<ReservedRowFields> {
    if (!session) return {};
    return {
      serverSession: {
        serverConnection: session.connection, serverPasswordEncrypted: this.serverSessions.seal(session.password, launch.workspaceId),
        relaySecret: session.connection.mode === 'relay' ? randomSecret(32) : null,
      },
    };
  }
}
