import { Injectable } from '@nestjs/common';
import { WorkspaceProfiles } from '../../profiles/workspace-profiles.service';
import type { ResolvedLaunch } from '../launch-context';
import { LaunchOrder, LaunchStep, LaunchStepProvider } from '../launch-step';

/** Whether the workspace uses a persistent profile, and where (WorkspaceProfiles.decide: 403, 400, 409). */
@Injectable()
@LaunchStepProvider()
export class PersistentProfileStep implements LaunchStep {
  readonly name = 'persistent profile';
  readonly order = LaunchOrder.PersistentProfile;

  constructor(private readonly profiles: WorkspaceProfiles) {}

  async run(launch: ResolvedLaunch): Promise<void> {
    // A server workspace has no home of the user's: its bridge is ours, and the provision never loads a profile into it.
    if (launch.facts.serverSession) {
      launch.facts.profileLocation = null;
      return;
    }
    const { user, image, settings, request } = launch;
    launch.facts.profileLocation = await this.profiles.decide({ user, image, settings, mode: request.persistent_profile_mode });
  }
}
