// What other libraries and the apps use of @ws/auth; everything else is internal to it.
export { AccessService } from './access.service';
export { ApiKeyAuthenticator } from './api-key-authenticator';
export { ApiKey } from './api-key.entity';
export { ApiKeysService } from './api-keys.service';
export { AuthRateLimiter, LimitFailedAuth } from './auth-rate-limiter';
export { AuthModule } from './auth.module';
export type { Caller } from './caller';
export { JwtSigner } from './jwt-signer';
export type { SessionClaims } from './jwt-signer';
export { CurrentCaller, OPERATION_KEY, Operation, PublicRoute } from './operation.decorator';
export { OperationGuard } from './operation.guard';
export { OPERATIONS } from './operations';
export type { OperationName } from './operations';
export { closure } from './permissions';
export type { Permission } from './permissions';
