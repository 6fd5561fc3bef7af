export * from './license-key';
export * from './license.entity';
export * from './issuer-keys';
export * from './entitlements';
export * from './licensing.service';
export * from './licensing.mappers';
export * from './licensing.module';
export * from './dto/licensing.requests';
