import { Body, Controller } from '@nestjs/common';
import { Caller, CurrentCaller, Operation } from '@ws/auth';
import { PageRequest } from '@ws/database';
import {
  CreateUserRequest, DeleteUserRequest, GetUserRequest, SessionTokensService, TargetUserRequest, toUserAttributesResponse,
  toUserDetailResponse, toUserListItem, toUserResponse, UpdateAttributesRequest, UpdateUserRequest, UsersService,
} from '@ws/users';
import { UserDeletion, UserWorkspaces } from '@ws/workspaces';

@Controller('api/public')
export class UsersController {
  constructor(
    private readonly users: UsersService,
    private readonly deletion: UserDeletion,
    private readonly userWorkspaces: UserWorkspaces,
    private readonly sessions: SessionTokensService,
  ) {}

  @Operation('create_user')
  async createUser(@Body() body: CreateUserRequest) {
    const user = await this.users.create(body.target_user);
    const groups = await this.users.groupSummariesOf([user.id]);
    return { user: toUserResponse(user, groups.get(user.id) ?? []) };
  }

  @Operation('get_user')
  async getUser(@Body() body: GetUserRequest) {
    const user = await this.users.findByLookup(body.target_user);
    const [groups, workspaces] = await Promise.all([this.users.groupSummariesOf([user.id]), this.userWorkspaces.liveSummariesOf([user.id])]);
    return { user: toUserDetailResponse(user, groups.get(user.id) ?? [], workspaces.get(user.id) ?? []) };
  }

  @Operation('get_users')
  async getUsers(@Body() body: PageRequest) {
    const { rows: users, paging } = await this.users.list(body);
    const ids = users.map((u) => u.id);
    const [groups, workspaces] = await Promise.all([this.users.groupSummariesOf(ids), this.userWorkspaces.liveSummariesOf(ids)]);
    return { users: users.map((u) => toUserListItem(u, groups.get(u.id) ?? [], workspaces.get(u.id) ?? [])), ...paging };
  }

  @Operation('update_user')
  async updateUser(@Body() body: UpdateUserRequest, @CurrentCaller() caller: Caller) {
    const user = await this.users.update(caller, body.target_user);
    const groups = await this.users.groupSummariesOf([user.id]);
    return { user: toUserResponse(user, groups.get(user.id) ?? []) };
  }

  @Operation('delete_user')
  async deleteUser(@Body() body: DeleteUserRequest, @CurrentCaller() caller: Caller) {
    await this.deletion.delete(caller, body.target_user.user_id, body.force ?? false);
    return {};
  }

  @Operation('logout_user')
  async logoutUser(@Body() body: TargetUserRequest) {
    await this.sessions.logout(body.target_user.user_id);
    return {};
  }

  @Operation('get_attributes')
  async getAttributes(@Body() body: TargetUserRequest) {
    return { user_attributes: toUserAttributesResponse(await this.users.getAttributes(body.target_user.user_id)) };
  }

  @Operation('update_user_attributes')
  async updateAttributes(@Body() body: UpdateAttributesRequest, @CurrentCaller() caller: Caller) {
    await this.users.updateAttributes(caller, body.target_user_attributes);
    return {};
  }
}
