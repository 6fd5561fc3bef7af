import { Body, Controller, HttpCode, Post, UseInterceptors } from '@nestjs/common';
import { IsString, Length } from 'class-validator';
import { LimitFailedAuth, PublicRoute } from '@ws/auth';
import { ApiError, ErrorCode, formatTimestamp, toWireId } from '@ws/common';
import { SessionTokensService, UsersService } from '@ws/users';

class SessionCheckRequest {
  @IsString() @Length(1, 8192) session_jwt!: string;
}

/** The browser client asks who its session JWT stands for; revoked, superseded or expired tokens get 401. */
@Controller('api/client')
export class ClientSessionController {
  constructor(
    private readonly tokens: SessionTokensService,
    private readonly users: UsersService,
  ) {}

  @Post('session')
  @HttpCode(200)
  @PublicRoute()
  // Forged or expired credentials count against the address (429 past AUTH_FAILURES_PER_ADDRESS).
  @UseInterceptors(LimitFailedAuth)
  async whoami(@Body() body: SessionCheckRequest) {
    const verified = await this.tokens.verify(body.session_jwt);
    if (!verified) throw new ApiError(ErrorCode.Unauthenticated, 'This session is not valid; ask for a new link');
    const user = await this.users.findActive(toWireId(verified.token.userId));
    return { user_id: toWireId(user.id), username: user.username, expires_at: formatTimestamp(verified.token.expiresAt) };
  }
}
