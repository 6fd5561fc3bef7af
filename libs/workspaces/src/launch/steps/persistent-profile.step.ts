import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { WorkspaceProfiles } from '../../profiles/workspace-profiles.service';
import type { IssuedLaunch, ResolvedLaunch } from '../launch-context';
import { LaunchOrder, LaunchStep, LaunchStepProvider, ReservedRowFields } from '../launch-step';

/** Where the workspace loads and saves its profile (modes Enabled and Reset), else null. */
type ProfileLocation = string | null;

/** Whether the workspace uses a persistent profile, and where (WorkspaceProfiles.decide: 403, 400, 409). */
@Injectable()
@LaunchStepProvider()
export class PersistentProfileStep implements LaunchStep<ProfileLocation> {
  readonly name = 'persistent profile';
  readonly order = LaunchOrder.PersistentProfile;

  constructor(private readonly profiles: WorkspaceProfiles) {}

  async run({ user, image, settings, request }: ResolvedLaunch): Promise<ProfileLocation> {
    // A server workspace has no home of the user's: its bridge is ours, and the provision never loads a profile into it.
    if (image.kind === 'server') return null;
    return this.profiles.decide({ user, image, settings, mode: request.persistentProfileMode });
  }

  /** The row's profile columns: the mode asked for (an image with a profile path only), and where it lives. */
  async reserve(_tx: EntityManager, { image, request }: IssuedLaunch, location: ProfileLocation): Promise<ReservedRowFields> {
    const mode = image.persistentProfilePath && image.kind !== 'server' ? request.persistentProfileMode ?? null : null;
    return { profile: { persistentProfileMode: mode, isPersistentProfile: mode !== null && mode !== 'Disabled', profileLocation: location } };
  }
}
