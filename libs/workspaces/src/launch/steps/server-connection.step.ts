import { Injectable } from '@nestjs/common';
import { ApiError, ErrorCode, toWireId } from '@ws/common';
import { WorkspaceServerSessions } from '../../server-sessions/workspace-server-sessions.service';
import type { ResolvedLaunch } from '../launch-context';
import { LaunchOrder, LaunchStep, LaunchStepProvider } from '../launch-step';

/**
 * A server image's connection (WorkspaceServerSessions.resolve: connection_info and rdp_client_type, each a clear
 * 400); a container image takes neither. A server workspace never comes from staging and joins no egress gateway.
 */
@Injectable()
@LaunchStepProvider()
export class ServerConnectionStep implements LaunchStep {
  readonly name = 'server connection';
  readonly order = LaunchOrder.ServerConnection;

  constructor(private readonly serverSessions: WorkspaceServerSessions) {}

  async run(launch: ResolvedLaunch): Promise<void> {
    const { request, image, inputs } = launch;
    if (image.kind !== 'server') {
      if (request.connection_info) throw new ApiError(ErrorCode.InvalidRequest, 'connection_info applies to RDP, VNC and SSH server images, not to container images');
      if (request.rdp_client_type) throw new ApiError(ErrorCode.InvalidRequest, 'rdp_client_type applies to RDP server images, not to container images');
      launch.facts.serverSession = null;
      return;
    }
    // What only a container of the user's own takes is refused, never ignored.
    const containerOnly = [
      ['egress_gateway_id', request.egress_gateway_id], ['environment', request.environment && Object.keys(request.environment).length > 0 ? request.environment : undefined],
      ['container_network', inputs.containerNetwork],
    ].find(([, value]) => value);
    if (containerOnly) throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is a server image; ${containerOnly[0]} applies to container images`);
    launch.facts.serverSession = await this.serverSessions.resolve(image, request, launch.user.username);
  }
}
