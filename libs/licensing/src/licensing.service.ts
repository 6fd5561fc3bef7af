import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import { ActivateRequest } from './dto/licensing.requests';
import { AppliedLicense, Entitlements, LicenseRow } from './entitlements';
import { IssuerKeys } from './issuer-keys';
import { LicenseKeyError, verifyLicenseKey } from './license-key';

/** Activating and removing licenses; what applies is read through Entitlements. */
@Injectable()
export class LicensingService {
  constructor(
    private readonly db: DataSource,
    private readonly issuers: IssuerKeys,
    private readonly entitlements: Entitlements,
  ) {}

  /**
   * Verifies the key (shape, trusted issuer, signature, expiry: a 400 saying which failed), applies `seats` (at
   * most the entitlement's limit; omitted: the limit) and records the activation; it applies at once here and, by
   * the `license_changed` notice, on every other process. issued_to: the signed one is authoritative; the
   * request's fills it only when the key leaves it empty, and a request naming someone else is refused.
   */
  async activate(request: ActivateRequest, now = new Date()): Promise<AppliedLicense> {
    let entitlement;
    try {
      entitlement = verifyLicenseKey(request.activation_key, this.issuers.keys, now);
    } catch (err) {
      if (err instanceof LicenseKeyError) throw new ApiError(ErrorCode.InvalidRequest, err.message);
      throw err;
    }
    const seats = request.seats ?? entitlement.limit;
    if (seats > entitlement.limit) {
      throw new ApiError(ErrorCode.InvalidRequest, `seats (${seats}) is above the limit of license ${entitlement.license_id} (${entitlement.limit})`);
    }
    const requested = request.issued_to?.trim() ?? '';
    if (entitlement.issued_to && requested && requested.toLowerCase() !== entitlement.issued_to.toLowerCase()) {
      throw new ApiError(ErrorCode.InvalidRequest, `issued_to (${requested}) does not match the license's issued_to (${entitlement.issued_to}); omit it to use the license's`);
    }
    const issuedTo = entitlement.issued_to || requested;
    await this.db.query(
      `INSERT INTO licenses (license_id, activation_key, seats, issued_to, activated_at) VALUES ($1, $2, $3, $4, clock_timestamp())
       ON CONFLICT (license_id) DO UPDATE SET activation_key = EXCLUDED.activation_key, seats = EXCLUDED.seats,
         issued_to = EXCLUDED.issued_to, activated_at = EXCLUDED.activated_at`,
      [entitlement.license_id, request.activation_key.trim(), seats, issuedTo],
    );
    const applied = await this.entitlements.refresh();
    // The row just written is the newest; only a concurrent activation could be newer, and then that one applies.
    return applied?.entitlement.license_id === entitlement.license_id ? applied : { entitlement, seats, issuedTo, activatedAt: now };
  }

  /** Removes an activation (the CLI); the next newest one, or the free tier, applies. False when there was none. */
  async remove(licenseId: string): Promise<boolean> {
    const [, affected] = (await this.db.query('DELETE FROM licenses WHERE license_id = $1', [licenseId])) as [unknown, number];
    await this.entitlements.refresh();
    return affected > 0;
  }

  /** Every activation, newest first, with whether it still verifies (the CLI). */
  async activations(): Promise<Array<{ licenseId: string; seats: number; issuedTo: string; activatedAt: Date; problem: string | null }>> {
    const rows = (await this.db.query('SELECT license_id, activation_key, seats, issued_to, activated_at FROM licenses ORDER BY activated_at DESC, license_id')) as LicenseRow[];
    return rows.map((row) => {
      let problem: string | null = null;
      try {
        verifyLicenseKey(row.activation_key, this.issuers.keys, new Date());
      } catch (err) {
        problem = (err as Error).message;
      }
      return { licenseId: row.license_id, seats: row.seats, issuedTo: row.issued_to, activatedAt: new Date(row.activated_at), problem };
    });
  }
}
