// What other libraries and the apps use of @ws/licensing; everything else is internal to it.
export { ActivateRequest } from './dto/licensing.requests';
export { Entitlements } from './entitlements';
export { LICENSE_FEATURES, featureSet, isLicenseFeature, issueLicenseKey, issuerKeyId, parseIssuerPrivateKey, publicKeyText } from './license-key';
export type { LicenseFeature } from './license-key';
export { License } from './license.entity';
export { toLicenseResponse } from './licensing.mappers';
export { LicensingModule } from './licensing.module';
export { LicensingService } from './licensing.service';
