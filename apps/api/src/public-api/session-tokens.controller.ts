import { Body, Controller } from '@nestjs/common';
import { Operation } from '@ws/auth';
import { LoginLinksService, SessionTokenRequest, SessionTokensRequest, SessionTokensService, TargetUserRequest, toSessionTokenResponse } from '@ws/users';

@Controller('api/public')
export class SessionTokensController {
  constructor(
    private readonly tokens: SessionTokensService,
    private readonly loginLinks: LoginLinksService,
  ) {}

  @Operation('get_login')
  async getLogin(@Body() body: TargetUserRequest) {
    return { url: await this.loginLinks.create(body.target_user.user_id) };
  }

  @Operation('create_session_token')
  async create(@Body() body: TargetUserRequest) {
    const { token, jwt } = await this.tokens.create(body.target_user.user_id);
    return { session_token: toSessionTokenResponse(token, jwt) };
  }

  @Operation('get_session_token')
  async get(@Body() body: SessionTokenRequest) {
    const { token, jwt } = await this.tokens.reissue(body.target_session_token.session_token);
    return { session_token: toSessionTokenResponse(token, jwt) };
  }

  @Operation('get_session_tokens')
  async list(@Body() body: SessionTokensRequest) {
    const { rows, paging } = await this.tokens.list(body.target_user.user_id, body);
    return { session_tokens: rows.map((t) => toSessionTokenResponse(t)), ...paging };
  }

  @Operation('update_session_token')
  async promote(@Body() body: SessionTokenRequest) {
    const { token, jwt } = await this.tokens.promote(body.target_session_token.session_token);
    return { session_token: toSessionTokenResponse(token, jwt) };
  }

  @Operation('delete_session_token')
  async delete(@Body() body: SessionTokenRequest) {
    await this.tokens.delete(body.target_session_token.session_token);
    return {};
  }

  @Operation('delete_session_tokens')
  async deleteAll(@Body() body: TargetUserRequest) {
    await this.tokens.deleteAllOf(body.target_user.user_id);
    return {};
  }
}
