import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AccessService } from './access.service';
import { ApiKey } from './api-key.entity';
import { ApiKeyAuthenticator } from './api-key-authenticator';
import { ApiKeysService } from './api-keys.service';
import { AuthRateLimiter, LimitFailedAuth } from './auth-rate-limiter';
import { IdempotencyKey } from './idempotency/idempotency-key.entity';
import { IdempotencyKeys } from './idempotency/idempotency-keys';
import { JwtSigner } from './jwt-signer';
import { OperationAuthorizer } from './operation.guard';
import { OperatorAuthenticator } from './operator-authenticator';

@Global()
@Module({
  imports: [TypeOrmModule.forFeature([ApiKey, IdempotencyKey])],
  providers: [ApiKeysService, ApiKeyAuthenticator, AccessService, JwtSigner, AuthRateLimiter, LimitFailedAuth, IdempotencyKeys, OperatorAuthenticator, OperationAuthorizer],
  exports: [ApiKeysService, ApiKeyAuthenticator, AccessService, JwtSigner, AuthRateLimiter, LimitFailedAuth, IdempotencyKeys, OperatorAuthenticator, OperationAuthorizer],
})
export class AuthModule {}
