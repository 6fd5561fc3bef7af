import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { newId } from '@ws/common';
import { GroupsService } from '@ws/groups';
import { WorkspaceEgress } from '../../egress/workspace-egress.service';
import type { IssuedLaunch, ResolvedLaunch } from '../launch-context';
import { LaunchOrder, LaunchStep, LaunchStepProvider, ReservedRowFields } from '../launch-step';

/** The user's groups (ids), for an egress credential attached to one of them; null when no gateway is asked for. */
type CheckedEgress = { groupIds: string[] } | null;

/**
 * egress_gateway_id: the gateway exists and the user may use it (a credential of its provider on the user, one
 * of their groups or the image), checked before anything is recorded (400, 403, 409); the connection is reserved
 * in the recording transaction, under the connection limit. A staged workspace never serves such a request (its
 * container already started).
 */
@Injectable()
@LaunchStepProvider()
export class EgressStep implements LaunchStep<CheckedEgress> {
  readonly name = 'egress';
  readonly order = LaunchOrder.Egress;

  constructor(
    private readonly egress: WorkspaceEgress,
    private readonly groups: GroupsService,
  ) {}

  async run({ request, user, image }: ResolvedLaunch): Promise<CheckedEgress> {
    const gatewayId = request.egressGatewayId;
    if (!gatewayId) return null;
    const groupIds = ((await this.groups.groupsOf([user.id])).get(user.id) ?? []).map((g) => g.id);
    await this.egress.check({ workspaceId: newId(), userId: user.id, groupIds, imageId: image.id, gatewayId });
    return { groupIds };
  }

  async reserve(tx: EntityManager, { request, workspaceId, user, image }: IssuedLaunch, checked: CheckedEgress): Promise<ReservedRowFields> {
    const gatewayId = request.egressGatewayId;
    if (!gatewayId || !checked) return {};
    const egress = await this.egress.reserve(tx, { workspaceId, userId: user.id, groupIds: checked.groupIds, imageId: image.id, gatewayId });
    return { launchOptions: { egressGatewayId: egress.gateway.id } };
  }
}
