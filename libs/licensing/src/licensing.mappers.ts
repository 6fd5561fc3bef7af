import { formatTimestamp } from '@ws/common';
import type { AppliedLicense } from './entitlements';

/** The spec's License: `limit` is what applies here (the activation's seats); verified, or it would not be applied. */
export function toLicenseResponse(license: AppliedLicense) {
  const { entitlement } = license;
  return {
    license_id: entitlement.license_id,
    expiration: formatTimestamp(entitlement.expiration),
    issued_at: formatTimestamp(entitlement.issued_at),
    issued_to: license.issuedTo,
    limit: license.seats,
    is_verified: true,
    license_type: entitlement.license_type,
    sku: entitlement.sku,
    features: { ...entitlement.features },
  };
}
