import { BlockList, isIP } from 'node:net';

/**
 * The client's address as Fastify's trustProxy works it out, for raw requests Fastify never sees (websocket
 * upgrades): X-Forwarded-For is walked from the right only while the hop it came from is a trusted proxy.
 */
export class TrustedProxies {
  private readonly list = new BlockList();
  private readonly any: boolean;

  constructor(entries: string[]) {
    for (const entry of entries) {
      const [address, bits] = entry.split('/');
      const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.list.addAddress(address, family);
      else this.list.addSubnet(address, Number(bits), family);
    }
    this.any = entries.length > 0;
  }

  clientAddress(socketAddress: string | undefined, forwardedFor: string | string[] | undefined): string {
    let address = unmapped(socketAddress ?? '');
    if (!this.any || forwardedFor === undefined) return address;
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',').map((hop) => unmapped(hop.trim()));
    for (let i = hops.length - 1; i >= 0 && this.trusted(address); i--) {
      if (!isIP(hops[i])) break;
      address = hops[i];
    }
    return address;
  }

  private trusted(address: string): boolean {
    const family = isIP(address);
    return family !== 0 && this.list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  }
}

/** `::ffff:1.2.3.4` (an IPv4 client on a dual-stack socket) is 1.2.3.4. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}
