import { AddressKind, classifyAddress, TargetAddressPolicy } from './target-address';

const none = new TargetAddressPolicy({ SERVER_TARGETS_ALLOW_PRIVATE: false, SERVER_TARGETS_ALLOW: '' });
const reason = (policy: TargetAddressPolicy, ip: string) => {
  const check = policy.checkAddress(ip);
  return check.allowed ? null : check.reason;
};

describe('server target addresses', () => {
  it('classifies every IPv4 range', () => {
    const expected: Array<[string, AddressKind]> = [
      ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'],
      ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'],
      ['169.254.0.1', 'link-local'], ['169.254.255.255', 'link-local'],
      ['169.254.169.254', 'metadata'], ['169.254.170.2', 'metadata'], ['100.100.100.200', 'metadata'], ['168.63.129.16', 'metadata'],
      ['10.0.0.1', 'private'], ['10.255.255.255', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'],
      ['100.64.0.1', 'private'], ['100.127.255.255', 'private'], ['198.18.0.1', 'private'], ['192.0.0.8', 'private'],
      ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['255.255.255.255', 'broadcast'], ['240.0.0.1', 'reserved'],
      ['192.0.2.1', 'reserved'], ['198.51.100.7', 'reserved'], ['203.0.113.9', 'reserved'],
      ['8.8.8.8', 'public'], ['172.15.255.255', 'public'], ['172.32.0.1', 'public'], ['100.63.255.255', 'public'], ['100.128.0.0', 'public'],
      ['169.253.255.255', 'public'], ['11.0.0.1', 'public'], ['192.169.0.1', 'public'], ['223.255.255.255', 'public'],
    ];
    for (const [ip, kind] of expected) expect({ ip, kind: classifyAddress(ip) }).toEqual({ ip, kind });
  });

  it('classifies IPv6, and IPv6 forms of IPv4 addresses as the address they stand for', () => {
    const expected: Array<[string, AddressKind]> = [
      ['::', 'unspecified'], ['::1', 'loopback'], ['0:0:0:0:0:0:0:1', 'loopback'], ['fe80::1', 'link-local'], ['fe80::1%eth0', 'link-local'], ['febf::1', 'link-local'],
      ['fd00:ec2::254', 'metadata'], ['fc00::1', 'private'], ['fdff:ffff::1', 'private'], ['fec0::1', 'private'], ['ff02::1', 'multicast'],
      ['2001:db8::1', 'reserved'], ['2606:4700:4700::1111', 'public'], ['2001:4860:4860::8888', 'public'],
      // IPv4-mapped, in both spellings, and of each kind.
      ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['0:0:0:0:0:ffff:7f00:0001', 'loopback'], ['::FFFF:127.0.0.1', 'loopback'],
      ['::ffff:169.254.169.254', 'metadata'], ['::ffff:a9fe:a9fe', 'metadata'], ['::ffff:10.1.2.3', 'private'], ['::ffff:0.0.0.0', 'unspecified'],
      ['::ffff:169.254.1.1', 'link-local'], ['::ffff:8.8.8.8', 'public'],
      // SIIT, IPv4-compatible, NAT64 (well-known and local-use) and 6to4.
      ['::ffff:0:127.0.0.1', 'loopback'], ['::127.0.0.1', 'loopback'], ['::a9fe:a9fe', 'metadata'], ['64:ff9b::127.0.0.1', 'loopback'],
      ['64:ff9b::a00:1', 'private'], ['64:ff9b:1::a9fe:a9fe', 'metadata'], ['2002:7f00:1::', 'loopback'], ['2002:c0a8:101::1', 'private'], ['2002:808:808::1', 'public'],
    ];
    for (const [ip, kind] of expected) expect({ ip, kind: classifyAddress(ip) }).toEqual({ ip, kind });
    expect(() => classifyAddress('localhost')).toThrow(/not an IP address/);
    expect(() => classifyAddress('127.1')).toThrow(/not an IP address/);
  });

  it('refuses loopback, link-local and private targets by default, and says what allows them', () => {
    expect(reason(none, '127.0.0.1')).toBe('a loopback address (this machine); the operator allows such targets only by listing them in SERVER_TARGETS_ALLOW');
    expect(reason(none, 'fe80::1')).toMatch(/^a link-local address; .*SERVER_TARGETS_ALLOW/);
    expect(reason(none, '10.0.0.5')).toBe('a private-network address; the operator allows private targets with SERVER_TARGETS_ALLOW_PRIVATE=true or SERVER_TARGETS_ALLOW');
    expect(reason(none, '::ffff:192.168.0.1')).toMatch(/^a private-network address/);
    expect(none.checkAddress('8.8.8.8')).toEqual({ allowed: true, address: '8.8.8.8' });
    expect(none.checkAddress('2606:4700:4700::1111')).toEqual({ allowed: true, address: '2606:4700:4700::1111' });
  });

  it('allows private targets with SERVER_TARGETS_ALLOW_PRIVATE, and loopback only when listed; never metadata and the like', () => {
    const privateOnly = new TargetAddressPolicy({ SERVER_TARGETS_ALLOW_PRIVATE: true, SERVER_TARGETS_ALLOW: '' });
    for (const ip of ['10.0.0.5', '172.17.0.2', '192.168.1.1', '100.64.0.1', 'fd12::1', '::ffff:10.0.0.5']) expect({ ip, allowed: privateOnly.checkAddress(ip).allowed }).toEqual({ ip, allowed: true });
    for (const ip of ['127.0.0.1', '::1', '169.254.1.1', 'fe80::1', '169.254.169.254']) expect({ ip, allowed: privateOnly.checkAddress(ip).allowed }).toEqual({ ip, allowed: false });

    const listed = new TargetAddressPolicy({ SERVER_TARGETS_ALLOW_PRIVATE: false, SERVER_TARGETS_ALLOW: '127.0.0.0/8, 10.1.0.0/16,fe80::/10, 0.0.0.0/0' });
    expect(listed.checkAddress('127.0.0.1')).toEqual({ allowed: true, address: '127.0.0.1' });
    // An IPv4-mapped address is listed as its IPv4 address, and connected to as that.
    expect(listed.checkAddress('::ffff:127.0.0.1')).toEqual({ allowed: true, address: '127.0.0.1' });
    expect(listed.checkAddress('10.1.2.3').allowed).toBe(true);
    expect(listed.checkAddress('fe80::1').allowed).toBe(true);
    expect(listed.checkAddress('::1').allowed).toBe(false);
    // 0.0.0.0/0 lists everything IPv4, yet metadata, unspecified, multicast, broadcast and reserved stay refused.
    for (const ip of ['169.254.169.254', '::ffff:169.254.169.254', '0.0.0.0', '224.0.0.1', '255.255.255.255', '240.0.0.1', '192.0.2.1']) {
      expect({ ip, reason: reason(listed, ip) }).toEqual({ ip, reason: expect.stringMatching(/which is never a server target$/) });
    }
  });

  it('knows names that always mean this machine or a metadata service', () => {
    const listed = new TargetAddressPolicy({ SERVER_TARGETS_ALLOW_PRIVATE: false, SERVER_TARGETS_ALLOW: '127.0.0.0/8' });
    for (const name of ['localhost', 'LOCALHOST', 'localhost.', 'a.b.localhost']) {
      expect(none.checkLiteral(name)).toEqual({ allowed: false, reason: expect.stringMatching(/^a loopback address/) });
      expect(listed.checkLiteral(name)).toEqual({ allowed: true, address: '127.0.0.1' });
    }
    for (const name of ['metadata.google.internal', 'Metadata.Google.Internal.', 'metadata', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']) {
      expect(listed.checkLiteral(name)).toEqual({ allowed: false, reason: 'a cloud metadata service address, which is never a server target' });
    }
    expect(none.checkLiteral('lab-1.example.org')).toBeNull();
    expect(none.checkLiteral('notlocalhost')).toBeNull();
  });

  it('resolves a name and checks every address it has', async () => {
    // glibc reads these as IPv4 numbers: names to the literal check, loopback and metadata once resolved.
    expect(await none.resolve('0x7f000001')).toEqual({ allowed: false, reason: expect.stringMatching(/^a loopback address/) });
    expect(await none.resolve('0xa9fea9fe')).toEqual({ allowed: false, reason: expect.stringMatching(/^a cloud metadata service address/) });
    const listed = new TargetAddressPolicy({ SERVER_TARGETS_ALLOW_PRIVATE: false, SERVER_TARGETS_ALLOW: '127.0.0.0/8' });
    expect(await listed.resolve('0x7f000001')).toEqual({ allowed: true, address: '127.0.0.1' });
    expect(await none.resolve('8.8.4.4')).toEqual({ allowed: true, address: '8.8.4.4' });
    expect(await none.resolve('no-such-host.invalid')).toEqual({ allowed: 'unresolved', error: expect.any(String) });
  });
});
