import { createHmac, randomBytes } from 'node:crypto';
import { isIPv6 } from 'node:net';

/** Version tag of the relay credential (images/desktop: workspace-rdp-relay checks the same format). */
const CREDENTIAL_VERSION = 'ws1';

/**
 * A short-lived credential the workspace's RDP relay admits a new connection with: it travels as the RDP
 * Pre-Connection PDU's blob (MS-RDPEPS, `pcb:s:` of a .rdp file), which the relay consumes before relaying.
 * `ws1.<workspace id>.<expiry, unix seconds>.<nonce>.<HMAC-SHA256(secret, the part before it), hex>`.
 */
export function mintRelayCredential(secret: string, workspaceId: string, expiresAt: Date, nonce = randomBytes(8).toString('hex')): string {
  const signed = `${CREDENTIAL_VERSION}.${workspaceId}.${Math.floor(expiresAt.getTime() / 1000)}.${nonce}`;
  return `${signed}.${createHmac('sha256', Buffer.from(secret, 'utf8')).update(signed, 'utf8').digest('hex')}`;
}

export interface RdpClientTarget {
  host: string;
  port: number;
  username: string;
  domain: string;
  credential: string;
}

/** host:port as a .rdp file's `full address` takes it (an IPv6 address in brackets). */
const fullAddress = (host: string, port: number) => `${isIPv6(host) ? `[${host}]` : host}:${port}`;

/** The settings both the file and the url carry, in the .rdp key:type:value form. */
function rdpSettings(target: RdpClientTarget): Array<[string, string, string]> {
  return [
    ['full address', 's', fullAddress(target.host, target.port)],
    ...(target.username ? [['username', 's', target.username] as [string, string, string]] : []),
    ...(target.domain ? [['domain', 's', target.domain] as [string, string, string]] : []),
    ['pcb', 's', target.credential],
    // The relay passes the RDP stream through: the server's own logon (and its certificate) is the user's to answer.
    ['prompt for credentials', 'i', '1'],
  ];
}

/** A .rdp file (mstsc, FreeRDP): CRLF lines. Values never hold line breaks (server-target.ts refuses control characters). */
export function rdpFile(target: RdpClientTarget): string {
  return `${rdpSettings(target).map(([key, type, value]) => `${key}:${type}:${value}`).join('\r\n')}\r\n`;
}

/** The same settings as an `rdp://` url (the Remote Desktop clients' URI scheme: key=type:value pairs joined by &). */
export function rdpUrl(target: RdpClientTarget): string {
  return `rdp://${rdpSettings(target).map(([key, type, value]) => `${encodeURIComponent(key)}=${type}:${encodeURIComponent(value)}`).join('&')}`;
}
