import { TargetAddressPolicy, TargetCheck } from '@ws/images';

/** What the flag lifts: loopback, link-local and private ranges (metadata and the like stay refused: TargetAddressPolicy's NEVER). */
const LIFTED = '127.0.0.0/8,::1/128,169.254.0.0/16,fe80::/10';

/**
 * Where a webhook may deliver: the server targets' address rules (@ws/images TargetAddressPolicy, one checker for
 * both), with WEBHOOK_ALLOW_PRIVATE_ADDRESSES as the one allowance. Checked when a url is saved and again before
 * each delivery, after the name is resolved; the delivery connects to the address that was checked.
 */
export function webhookAddressPolicy(allowPrivate: boolean): TargetAddressPolicy {
  return new TargetAddressPolicy(
    { SERVER_TARGETS_ALLOW_PRIVATE: allowPrivate, SERVER_TARGETS_ALLOW: allowPrivate ? LIFTED : '' },
    {
      subject: 'webhook receiver',
      allowance: () => 'the operator allows loopback, link-local and private receivers with WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true',
    },
  );
}

export type AddressCheck = TargetCheck | { allowed: 'unresolved'; error: string };

/** The URL's host as the resolver takes it (IPv6 literals without brackets). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}
