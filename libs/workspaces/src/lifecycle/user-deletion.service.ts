import { Injectable } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode } from '@ws/common';
import { UsersService } from '@ws/users';
import { UserWorkspaces } from '../reads/user-workspaces';
import { WorkspaceTeardown } from './workspace-teardown.service';

/**
 * The SQLSTATE of the `users` trigger that refuses to delete a user who still owns a starting, running or failed
 * workspace (migration NeverReassignWorkspaces): the foreign key would null its owner and leave it running for
 * nobody. Every deletion ends the user's workspaces through the lifecycle first (stopping ones may lose their owner).
 */
export const OWNS_LIVE_WORKSPACES = 'WSL01';

/** True when `err` is that trigger's refusal. */
export function ownsLiveWorkspaces(err: unknown): boolean {
  return err instanceof QueryFailedError && (err.driverError as { code?: string }).code === OWNS_LIVE_WORKSPACES;
}

/** delete_user: the rules that span users and their workspaces. */
@Injectable()
export class UserDeletion {
  constructor(
    private readonly users: UsersService,
    private readonly teardown: WorkspaceTeardown,
    private readonly userWorkspaces: UserWorkspaces,
    private readonly access: AccessService,
  ) {}

  async delete(caller: Caller, userId: string, force: boolean): Promise<void> {
    const user = await this.users.find(userId);
    await this.users.requireModifiable(caller, user);
    const live = (await this.userWorkspaces.liveOf([user.id])).get(user.id) ?? [];
    if (live.some((w) => w.status === 'running' || w.status === 'starting')) {
      this.access.require(caller, ['Sessions Delete'], 'the target user has running sessions');
    }
    if (live.length > 0 && !force) {
      throw new ApiError(ErrorCode.Conflict, `User (${userId}) has ${live.length} workspace(s); delete them first or send force true`);
    }
    // Through the lifecycle (stopping, then the worker removes the container): never left running without an owner.
    for (const workspace of live) await this.teardown.destroy(workspace.id, 'user_deleted');
    try {
      await this.users.remove(user.id);
    } catch (err) {
      // A workspace recorded for the user since the list above (a launch in flight): nothing was deleted.
      if (ownsLiveWorkspaces(err)) throw new ApiError(ErrorCode.Conflict, `User (${userId}) started a workspace meanwhile; try again`);
      throw err;
    }
  }
}
