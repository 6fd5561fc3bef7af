// What other libraries and the apps use of @ws/common; everything else is internal to it.
export { ConfigModule } from './config.module';
export { AppConfig, ConfigError, addressList, loadConfig } from './config';
export { RETRY_AFTER_SECONDS, dependencyOutage, markDependency } from './dependency-errors';
export { ApiError, ErrorCode, httpStatusFor } from './errors';
export { MIN_SECRETS_KEY_LENGTH, SECRETS_KEY_SETTING, SecretCipher, SecretCipherError } from './secret-cipher';
export type { SecretPurpose } from './secret-cipher';
export { newId, parseId, randomSecret, sha256, toWireId } from './ids';
export { addSeconds, formatTimestamp } from './timestamps';
export { MAX_JSON_DEPTH, Settable, ApiValidationPipe, validateBody, findJsonProblem, unstorableTextReason } from './validation';
export { acceptedInstance } from './validation-plans';
export { isKnownTimeZone, parseLanguageTag } from './locale';
export type { LanguageTag } from './locale';
