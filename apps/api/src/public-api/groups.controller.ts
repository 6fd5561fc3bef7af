import { Body, Controller } from '@nestjs/common';
import { Caller, CurrentCaller, Operation } from '@ws/auth';
import { GroupsService } from '@ws/groups';
import { UserGroupRequest, UsersService } from '@ws/users';

@Controller('api/public')
export class GroupsController {
  constructor(
    private readonly users: UsersService,
    private readonly groups: GroupsService,
  ) {}

  @Operation('add_user_group')
  async addUserGroup(@Body() body: UserGroupRequest, @CurrentCaller() caller: Caller) {
    const [user, group] = await Promise.all([this.users.find(body.target_user.user_id), this.groups.find(body.target_group.group_id)]);
    await this.groups.addMember(caller, user.id, group);
    return {};
  }

  @Operation('remove_user_group')
  async removeUserGroup(@Body() body: UserGroupRequest, @CurrentCaller() caller: Caller) {
    const [user, group] = await Promise.all([this.users.find(body.target_user.user_id), this.groups.find(body.target_group.group_id)]);
    await this.groups.removeMember(caller, user.id, group);
    return {};
  }
}
