import { Body, Controller, Get, Headers, HttpCode, Ip, Param, Post, UseInterceptors } from '@nestjs/common';
import { LimitFailedAuth, PublicRoute } from '@ws/auth';
import { CastLaunch, CastLaunchRequest, castRefused } from '@ws/casting';

const CAST_KEY = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The browser client's side of a cast link (`/#/cast/<key>`): what to show first, and the launch. Public:
 * the link is the credential, and its config's rules (CastLaunch) decide. The browser-route guard applies.
 */
@Controller('api/client/cast')
export class ClientCastController {
  constructor(private readonly casts: CastLaunch) {}

  @Get(':key/info')
  @PublicRoute()
  // A key that names no link counts as a failed login of the address (429 past AUTH_FAILURES_PER_ADDRESS), here and
  // at the launch: short keys cannot be enumerated quickly.
  @UseInterceptors(LimitFailedAuth)
  info(@Param('key') key: string) {
    if (!CAST_KEY.test(key)) throw castRefused('unknown_link', 'This link does not exist', null);
    return this.casts.info(key);
  }

  @Post()
  @HttpCode(200)
  @PublicRoute()
  // A forged or stale session_jwt (login_required, 401) counts as a failed login of the address, like /api/client/session.
  @UseInterceptors(LimitFailedAuth)
  launch(@Body() body: CastLaunchRequest, @Ip() address: string, @Headers('referer') referer: string | undefined) {
    return this.casts.launch(body, { address, referer });
  }
}
