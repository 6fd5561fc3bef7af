import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode } from '@ws/common';
import { User } from '@ws/users';
import { UsersService } from '@ws/users';
import { UserWorkspaces } from './user-workspaces';
import { WorkspaceTeardown } from './workspace-teardown.service';

/** delete_user: the rules that span users and their workspaces. */
@Injectable()
export class UserDeletion {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
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
    for (const workspace of live) await this.teardown.destroy(workspace.id, 'user_deleted');
    await this.db.getRepository(User).delete({ id: user.id });
  }
}
