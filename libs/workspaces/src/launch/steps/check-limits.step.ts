import { Injectable } from '@nestjs/common';
import { ApiError, ErrorCode, toWireId } from '@ws/common';
import { Entitlements } from '@ws/licensing';
import type { ResolvedLaunch } from '../launch-context';
import { LaunchOrder, LaunchStep, LaunchStepProvider } from '../launch-step';

/** What the image, the user's settings and the license allow (the session limit is held when the workspace is recorded). */
@Injectable()
@LaunchStepProvider()
export class CheckLimitsStep implements LaunchStep {
  readonly name = 'limits';
  readonly order = LaunchOrder.Limits;

  constructor(private readonly entitlements: Entitlements) {}

  async run({ image, request, settings }: ResolvedLaunch): Promise<void> {
    if (!image.enabled) throw new ApiError(ErrorCode.InvalidRequest, `Image (${toWireId(image.id)}) is disabled`);
    if (image.restrictToNetwork) {
      // The image's network wins over a cast visitor's choice; a different choice is refused, never ignored.
      if (!image.networkName) throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is restricted to a network but names none (network_name)`);
      const chosen = request.containerNetwork;
      if (chosen && chosen !== image.networkName) {
        throw new ApiError(ErrorCode.InvalidRequest, `Image ${image.friendlyName} (${toWireId(image.id)}) is restricted to the network ${image.networkName}; container_network ${chosen} is not allowed`);
      }
    }
    if (request.enableSharing) {
      await this.entitlements.assertFeature('session_sharing', 'Workspace sharing');
      if (!settings.clientSettings.allow_workspace_sharing) {
        throw new ApiError(ErrorCode.Forbidden, 'Sharing is not allowed for this user (client setting allow_workspace_sharing)');
      }
    }
  }
}
