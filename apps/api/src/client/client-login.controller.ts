import { Body, Controller, HttpCode, Post, UseInterceptors } from '@nestjs/common';
import { IsString, Length } from 'class-validator';
import { LimitFailedAuth, PublicRoute } from '@ws/auth';
import { toWireId } from '@ws/common';
import { LoginLinksService, toSessionTokenResponse } from '@ws/users';

class RedeemLoginRequest {
  @IsString() @Length(16, 256) login_token!: string;
}

/** The browser client's side of get_login: spends the one-time link and answers a session. */
@Controller('api/client')
export class ClientLoginController {
  constructor(private readonly loginLinks: LoginLinksService) {}

  @Post('login')
  @HttpCode(200)
  @PublicRoute()
  // Forged or expired credentials count against the address (429 past AUTH_FAILURES_PER_ADDRESS).
  @UseInterceptors(LimitFailedAuth)
  async redeem(@Body() body: RedeemLoginRequest) {
    const { token, jwt } = await this.loginLinks.redeem(body.login_token);
    return { user_id: toWireId(token.userId), session_token: toSessionTokenResponse(token, jwt) };
  }
}
