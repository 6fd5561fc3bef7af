// What other libraries and the apps use of @ws/users; everything else is internal to it.
export { CreateUserRequest, DeleteUserRequest, GetUserRequest, SessionTokenRequest, SessionTokensRequest, TargetUserRequest, UpdateAttributesRequest, UpdateUserRequest, UserGroupRequest } from './dto/user.requests';
export { LoginLink } from './login-link.entity';
export { LoginLinksService } from './login-links.service';
export { SessionToken } from './session-token.entity';
export { SessionTokensService } from './session-tokens.service';
export type { IssuedToken } from './session-tokens.service';
export { UserAttributes } from './user-attributes.entity';
export { User } from './user.entity';
export { toSessionTokenResponse, toUserAttributesResponse, toUserDetailResponse, toUserListItem, toUserResponse } from './user.mappers';
export type { UserWorkspaceSummary } from './user.mappers';
export { UsersModule } from './users.module';
export { UsersService } from './users.service';
export { USER_EVENT_TYPES, UserEvent, appendUserEvent, lastUserEventId, pruneUserEvents, userEventsAfter } from './user-events';
export type { UserEventMessage, UserEventType } from './user-events';
