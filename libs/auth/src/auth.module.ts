import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AccessService } from './access.service';
import { ApiKey } from './api-key.entity';
import { ApiKeyAuthenticator } from './api-key-authenticator';
import { ApiKeysService } from './api-keys.service';
import { AuthRateLimiter, LimitFailedAuth } from './auth-rate-limiter';
import { JwtSigner } from './jwt-signer';

@Global()
@Module({
  imports: [TypeOrmModule.forFeature([ApiKey])],
  providers: [ApiKeysService, ApiKeyAuthenticator, AccessService, JwtSigner, AuthRateLimiter, LimitFailedAuth],
  exports: [ApiKeysService, ApiKeyAuthenticator, AccessService, JwtSigner, AuthRateLimiter, LimitFailedAuth],
})
export class AuthModule {}
