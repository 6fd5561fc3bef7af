import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

/**
 * Which addresses a server image's target may be (issue 19, hole 7): the worker, the bridge and the relay connect
 * wherever a server image or a request's connection_info points, so a target on this machine, on a link-local or
 * cloud metadata address, or (unless the operator allows it) on a private network is refused, both as written and
 * after its name is resolved. See docs/decisions.md, "Security fixes (issue 19): server targets".
 */
export type AddressKind = 'public' | 'private' | 'loopback' | 'link-local' | 'metadata' | 'unspecified' | 'multicast' | 'broadcast' | 'reserved';

/** Kinds no setting allows: nothing legitimate is served there, and metadata services hand out cloud credentials. */
const NEVER: ReadonlySet<AddressKind> = new Set(['metadata', 'unspecified', 'multicast', 'broadcast', 'reserved']);

const KIND_TEXT: Record<AddressKind, string> = {
  public: 'a public address', private: 'a private-network address', loopback: 'a loopback address (this machine)', 'link-local': 'a link-local address',
  metadata: 'a cloud metadata service address', unspecified: 'an unspecified address', multicast: 'a multicast address', broadcast: 'a broadcast address',
  reserved: 'a reserved or documentation address',
};

interface Cidr {
  bytes: Uint8Array;
  bits: number;
}

/** An IPv4 or IPv6 literal as bytes (4 or 16); null for anything else. An IPv6 zone (`%eth0`) is dropped. */
function parseIp(text: string): Uint8Array | null {
  const address = text.split('%')[0];
  const family = isIP(address);
  if (family === 4) return Uint8Array.from(address.split('.').map(Number));
  if (family !== 6) return null;
  let groups = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) {
    const v4 = dotted[1].split('.').map(Number);
    groups = `${address.slice(0, -dotted[1].length)}${((v4[0] << 8) | v4[1]).toString(16)}:${((v4[2] << 8) | v4[3]).toString(16)}`;
  }
  const [head, tail] = groups.split('::');
  const part = (s: string | undefined) => (s ? s.split(':') : []);
  const words = tail === undefined ? part(head) : [...part(head), ...Array<string>(8 - part(head).length - part(tail).length).fill('0'), ...part(tail)];
  const bytes = new Uint8Array(16);
  words.forEach((word, i) => {
    const value = parseInt(word, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  return bytes;
}

function parseCidr(text: string): Cidr {
  const [address, bits] = text.split('/');
  const bytes = parseIp(address);
  if (!bytes) throw new Error(`not an IP address or CIDR: ${text}`);
  return { bytes, bits: bits === undefined ? bytes.length * 8 : Number(bits) };
}

function inCidr(bytes: Uint8Array, cidr: Cidr): boolean {
  if (bytes.length !== cidr.bytes.length) return false;
  for (let bit = 0; bit < cidr.bits; bit++) {
    const mask = 0x80 >> bit % 8;
    if ((bytes[bit >> 3] & mask) !== (cidr.bytes[bit >> 3] & mask)) return false;
  }
  return true;
}

/** First match wins: the metadata addresses sit inside link-local and CGNAT ranges. */
const RANGES: ReadonlyArray<[AddressKind, Cidr[]]> = ([
  // AWS/GCP/Azure/OpenStack IMDS, AWS ECS task and EKS pod credentials, Alibaba, Azure's wire server; AWS IPv6 IMDS.
  ['metadata', ['169.254.169.254', '169.254.170.2', '169.254.170.23', '100.100.100.200', '168.63.129.16', 'fd00:ec2::254', 'fd00:ec2::23']],
  ['unspecified', ['0.0.0.0/8', '::/128']],
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['link-local', ['169.254.0.0/16', 'fe80::/10']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '198.18.0.0/15', '192.0.0.0/24', 'fc00::/7', 'fec0::/10']],
  ['multicast', ['224.0.0.0/4', 'ff00::/8']],
  ['broadcast', ['255.255.255.255/32']],
  ['reserved', ['240.0.0.0/4', '192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', '2001:db8::/32', '100::/64']],
] as Array<[AddressKind, string[]]>).map(([kind, cidrs]) => [kind, cidrs.map(parseCidr)]);

/** IPv6 forms that carry an IPv4 address, and where: mapped, SIIT, IPv4-compatible, NAT64 (RFC 6052, 8215), 6to4. */
const IPV4_MAPPED = parseCidr('::ffff:0:0/96');
const EMBEDDED_V4: ReadonlyArray<[Cidr, number]> = [
  [IPV4_MAPPED, 12], [parseCidr('::ffff:0:0:0/96'), 12], [parseCidr('::/96'), 12],
  [parseCidr('64:ff9b::/96'), 12], [parseCidr('64:ff9b:1::/48'), 12], [parseCidr('2002::/16'), 2],
];

/** The IPv4 address an address stands for (itself, or the one an IPv6 form embeds); the bytes otherwise. */
function effective(bytes: Uint8Array): Uint8Array {
  if (bytes.length === 4) return bytes;
  // :: and ::1 are within ::/96 but are IPv6's own unspecified and loopback addresses.
  if (bytes.every((b, i) => b === 0 || (i === 15 && b === 1))) return bytes;
  const embedded = EMBEDDED_V4.find(([cidr]) => inCidr(bytes, cidr));
  return embedded ? bytes.slice(embedded[1], embedded[1] + 4) : bytes;
}

/** What kind of address `ip` is (an IPv4 or IPv6 literal; IPv6 forms that embed an IPv4 address count as that address). */
export function classifyAddress(ip: string): AddressKind {
  const bytes = parseIp(ip);
  if (!bytes) throw new Error(`not an IP address: ${ip}`);
  const address = effective(bytes);
  return RANGES.find(([, cidrs]) => cidrs.some((cidr) => inCidr(address, cidr)))?.[0] ?? 'public';
}

/** Names that reach this machine or a metadata service whatever DNS says (RFC 6761 localhost; GCE, AWS metadata names). */
const LOCALHOST = /^(.+\.)?localhost$/;
const METADATA_NAMES = /^(metadata|metadata\.google\.internal|metadata\.goog|instance-data|instance-data\.ec2\.internal)$/;

/** The operator's settings: SERVER_TARGETS_ALLOW_PRIVATE and SERVER_TARGETS_ALLOW (comma-separated addresses or CIDRs). */
export interface TargetAddressSettings {
  SERVER_TARGETS_ALLOW_PRIVATE: boolean;
  SERVER_TARGETS_ALLOW: string;
}

/** Why a target is refused (for the message), or null when it is allowed; `address` is what to connect to. */
export type TargetCheck = { allowed: true; address: string } | { allowed: false; reason: string };

/** How long a name may take to resolve at request time: past it the request goes on, and the worker checks again. */
const LOOKUP_TIMEOUT_MS = 5000;

/**
 * How refusals read for a caller other than server images (webhook receivers): what a target is called, and how
 * the operator allows a refused kind.
 */
export interface TargetWording {
  subject: string;
  allowance: (kind: AddressKind) => string;
}

const SERVER_TARGET_WORDING: TargetWording = {
  subject: 'server target',
  allowance: (kind) => kind === 'private'
    ? 'the operator allows private targets with SERVER_TARGETS_ALLOW_PRIVATE=true or SERVER_TARGETS_ALLOW'
    : 'the operator allows such targets only by listing them in SERVER_TARGETS_ALLOW',
};

export class TargetAddressPolicy {
  private readonly allowList: Cidr[];

  constructor(private readonly settings: TargetAddressSettings, private readonly wording: TargetWording = SERVER_TARGET_WORDING) {
    this.allowList = settings.SERVER_TARGETS_ALLOW.split(',').map((entry) => entry.trim()).filter(Boolean).map(parseCidr);
  }

  /** Whether the address may be a target: public, private with the operator's allowance, or on the allow-list (never metadata and the like). */
  checkAddress(ip: string): TargetCheck {
    const kind = classifyAddress(ip);
    const bytes = parseIp(ip) as Uint8Array;
    const stands = effective(bytes);
    const allowed = !NEVER.has(kind) && (kind === 'public' || (kind === 'private' && this.settings.SERVER_TARGETS_ALLOW_PRIVATE) || this.allowList.some((cidr) => inCidr(stands, cidr)));
    if (!allowed) return { allowed: false, reason: `${KIND_TEXT[kind]}${NEVER.has(kind) ? `, which is never a ${this.wording.subject}` : `; ${this.wording.allowance(kind)}`}` };
    // An IPv4-mapped address is connected to as the IPv4 address it stands for.
    return { allowed: true, address: inCidr(bytes, IPV4_MAPPED) ? stands.join('.') : ip };
  }

  /**
   * A host as written (an address, or a name that always means this machine or a metadata service); null when
   * only resolving can tell.
   */
  checkLiteral(host: string): TargetCheck | null {
    const name = host.toLowerCase().replace(/\.$/, '');
    if (LOCALHOST.test(name)) return this.checkAddress('127.0.0.1');
    if (METADATA_NAMES.test(name)) return { allowed: false, reason: `${KIND_TEXT.metadata}, which is never a ${this.wording.subject}` };
    return isIP(host) ? this.checkAddress(host) : null;
  }

  /**
   * Resolves the host and checks every address it has (one refused address refuses the name: which one a
   * connection would take is the resolver's choice). Answers the first address, which is what to connect to, so
   * a later lookup (DNS rebinding) cannot send the connection elsewhere. `unresolved` when the name has no address.
   */
  async resolve(host: string, timeoutMs = LOOKUP_TIMEOUT_MS): Promise<TargetCheck | { allowed: 'unresolved'; error: string }> {
    const literal = this.checkLiteral(host);
    if (literal) return literal;
    let timer: NodeJS.Timeout | undefined;
    let addresses: Array<{ address: string }>;
    try {
      addresses = await Promise.race([
        lookup(host, { all: true, verbatim: true }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch (err) {
      return { allowed: 'unresolved', error: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
    } finally {
      clearTimeout(timer);
    }
    if (addresses.length === 0) return { allowed: 'unresolved', error: 'no addresses' };
    const checks = addresses.map(({ address }) => this.checkAddress(address));
    const refused = checks.find((check) => !check.allowed);
    return refused ?? checks[0];
  }
}
