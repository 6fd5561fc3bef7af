/**
 * A real WireGuard gateway for the egress suites (issue 21), made of containers of the egress image
 * (scripts/build-egress-image.sh) on two Docker networks of the test's own; nothing leaves this machine:
 *   - `networkName` ("public"): where the gateway's endpoint listens (UDP 51820) and where workspaces that use it
 *     are put (their image is restricted to this network). A "canary" web server stands on it too: a workspace
 *     that goes out directly reaches it, one behind a kill switch does not.
 *   - an "outside" network, internal, that only the gateway joins besides the outside host: the gateway NATs tunnel
 *     traffic to it, so the outside host sees the gateway's address there (`exitAddress`). The outside host has no
 *     default route and accepts only the gateway's address: the stand-in for a service that allows one exit address.
 * Both web servers answer GET /cgi-bin/ip with the caller's address as they see it.
 * The gateway runs `wireguard-go` in server mode (user space: needs /dev/net/tun and NET_ADMIN), its key pair made
 * inside it with `wg genkey` / `wg pubkey`; `addPeer` makes a client key pair the same way and admits it.
 * `startOpenVpnGateway` makes the same site around Debian's openvpn in server mode (username/password clients).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import Docker from 'dockerode';
import * as tar from 'tar-stream';
import { randomSecret } from '@ws/common';
import { egressImage, localDocker, waitFor } from './harness';

const WG_PORT = 51820;
const HTTP_PORT = 8080;
const TUNNEL_NET = '10.99.0';

export interface EgressTestGateway {
  /** The Docker network of the gateway's endpoint and of the workspaces that join it. */
  networkName: string;
  /** host:port of the gateway (the egress gateway's `endpoint`). */
  endpoint: string;
  /** The gateway's WireGuard public key (its config `public_key`). */
  publicKey: string;
  /** The gateway's tunnel address (10.99.0.1). */
  tunnelAddress: string;
  /** The gateway's address on the outside network: what the outside host sees. */
  exitAddress: string;
  /** The outside host (reachable only through the gateway) and the canary (on the public network). */
  outsideAddress: string;
  canaryAddress: string;
  /** A client key pair admitted with this tunnel address (10.99.0.n/32); the private key is the credential's. */
  addPeer(n: number): Promise<{ privateKey: string; publicKey: string; address: string }>;
  /** Puts a file of `bytes` at GET /blob on the outside host and the canary (the egress benchmark's download). */
  serveBlob(bytes: number): Promise<void>;
  /** Stops the gateway container (the tunnel goes down until `start`). */
  stop(): Promise<void>;
  /** Starts the stopped gateway again, with its key and peers. */
  start(): Promise<void>;
  /** Removes every container and network it made. */
  close(): Promise<void>;
}

const WEB_SERVER = `set -e
mkdir -p /tmp/www/cgi-bin
printf '#!/bin/sh\\nprintf "Content-Type: text/plain\\\\r\\\\n\\\\r\\\\n%%s\\\\n" "$REMOTE_ADDR"\\n' > /tmp/www/cgi-bin/ip
chmod 755 /tmp/www/cgi-bin/ip
if [ -n "\${ALLOW:-}" ]; then
  ip route del default 2>/dev/null || true
  iptables -A INPUT -i lo -j ACCEPT
  iptables -A INPUT -p tcp --dport ${HTTP_PORT} -s "$ALLOW" -j ACCEPT
  iptables -A INPUT -p tcp --dport ${HTTP_PORT} -j DROP
fi
exec busybox httpd -f -p ${HTTP_PORT} -h /tmp/www`;

// Started again (start()), it keeps its key and its peers (/run/peers: "public-key address" lines).
const GATEWAY = `set -e
umask 077
rm -f /run/ready /var/run/wireguard/wg0.sock
[ -s /run/wg.key ] || wg genkey > /run/wg.key
WG_PROCESS_FOREGROUND=1 wireguard-go wg0 &
# The interface comes first and the control socket (what wg talks to) a moment later; a restart finds the old
# socket file, removed above.
for _ in $(seq 100); do [ -e /sys/class/net/wg0 ] && [ -S /var/run/wireguard/wg0.sock ] && break; sleep 0.1; done
wg set wg0 listen-port ${WG_PORT} private-key /run/wg.key
if [ -f /run/peers ]; then while read -r key address; do wg set wg0 peer "$key" allowed-ips "$address"; done < /run/peers; fi
ip address add ${TUNNEL_NET}.1/24 dev wg0
ip link set wg0 up
iptables -t nat -A POSTROUTING -s ${TUNNEL_NET}.0/24 ! -o wg0 -j MASQUERADE
wg pubkey < /run/wg.key > /run/wg.pub
touch /run/ready
wait`;

/** A shell command (for the workspace) that GETs /blob of `address` (serveBlob) and prints the bytes received and the milliseconds taken. */
export function downloadBlobCommand(address: string, timeoutSeconds = 120): string {
  return `s=$(date +%s%N); timeout ${timeoutSeconds} bash -c 'exec 3<>/dev/tcp/${address}/${HTTP_PORT}; printf "GET /blob HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3' | wc -c; echo $(( ($(date +%s%N) - s) / 1000000 ))`;
}

/** A shell command (for the workspace) that GETs /cgi-bin/ip of `address` within 5 s and prints the answer's last line. */
export function fetchAddressCommand(address: string): string {
  return `timeout 5 bash -c 'exec 3<>/dev/tcp/${address}/${HTTP_PORT}; printf "GET /cgi-bin/ip HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3' | tail -n 1`;
}

/** The test's networks, web servers and container helper, shared by the gateways below. */
async function openSite() {
  const engine = new Docker({ socketPath: '/var/run/docker.sock' });
  const host = localDocker();
  const image = egressImage();
  const suffix = randomSecret(4).toLowerCase();
  const label = { 'workspace-server.e2e': `egress-gateway-${suffix}` };
  const networkName = `ws-e2e-egress-pub-${suffix}`;
  const outsideName = `ws-e2e-egress-out-${suffix}`;
  const made: { containers: string[]; networks: string[] } = { containers: [], networks: [] };
  const close = async () => {
    for (const id of made.containers.reverse()) await host.remove(id).catch(() => undefined);
    for (const n of made.networks.reverse()) await engine.getNetwork(n).remove().catch(() => undefined);
  };
  /** A container of the egress image running `cmd` as root; `files` are written (archive API) before it starts. */
  const run = async (name: string, network: string, cmd: string, opts: { env?: string[]; tun?: boolean; forward?: boolean; also?: string; files?: Record<string, string> } = {}) => {
    const c = await engine.createContainer({
      name: `${name}-${suffix}`, Image: image, User: '0', Labels: label, Cmd: ['bash', '-c', cmd], Env: opts.env ?? [],
      HostConfig: {
        NetworkMode: network, CapDrop: ['ALL'], CapAdd: ['NET_ADMIN', 'NET_RAW'], Init: true,
        ...(opts.tun ? { Devices: [{ PathOnHost: '/dev/net/tun', PathInContainer: '/dev/net/tun', CgroupPermissions: 'rwm' }] } : {}),
        ...(opts.forward ? { Sysctls: { 'net.ipv4.ip_forward': '1' } } : {}),
      },
    });
    made.containers.push(c.id);
    if (opts.also) await engine.getNetwork(opts.also).connect({ Container: c.id });
    if (opts.files) await c.putArchive(tarOf(opts.files), { path: '/' });
    await c.start();
    return c.id;
  };
  const addressOn = async (id: string, network: string) => {
    const info = await engine.getContainer(id).inspect();
    const ip = info.NetworkSettings.Networks[network]?.IPAddress;
    if (!ip) throw new Error(`container ${id} has no address on ${network}`);
    return ip;
  };
  const ready = (what: string, id: string, test: string) =>
    waitFor(what, async () => (await host.exec(id, { cmd: test, user: 'root' })).exitCode === 0 || undefined, 20_000, 100);
  const open = async () => {
    await engine.createNetwork({ Name: networkName, Driver: 'bridge', Labels: label, Options: { 'com.docker.network.bridge.host_binding_ipv4': '127.0.0.1' } });
    made.networks.push(networkName);
    await engine.createNetwork({ Name: outsideName, Driver: 'bridge', Internal: true, Labels: label });
    made.networks.push(outsideName);
  };
  const servers: string[] = [];
  /** The outside host (accepting only the gateway's address there) and the canary. */
  const webServers = async (gateway: string) => {
    const exitAddress = await addressOn(gateway, outsideName);
    const outside = await run('ws-e2e-egress-outside', outsideName, WEB_SERVER, { env: [`ALLOW=${exitAddress}`] });
    const canary = await run('ws-e2e-egress-canary', networkName, WEB_SERVER);
    for (const id of [outside, canary]) await ready('a web server of the egress gateway', id, `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${HTTP_PORT}'`);
    servers.push(outside, canary);
    return { exitAddress, outsideAddress: await addressOn(outside, outsideName), canaryAddress: await addressOn(canary, networkName) };
  };
  /** Puts a file of `bytes` at GET /blob on the web servers (the egress benchmark's download). */
  const serveBlob = async (bytes: number) => {
    for (const id of servers) {
      const made = await host.exec(id, { cmd: `head -c ${Math.floor(bytes)} /dev/urandom > /tmp/www/blob`, user: 'root' });
      if (made.exitCode !== 0) throw new Error(`blob: ${made.stderr}`);
    }
  };
  return { engine, host, networkName, outsideName, run, addressOn, ready, open, webServers, serveBlob, close };
}

/** A tar stream of absolute path → content (mode 0755 for *.sh, 0600 for *.key, else 0644). */
function tarOf(files: Record<string, string>): Readable {
  const pack = tar.pack();
  for (const [path, content] of Object.entries(files)) {
    pack.entry({ name: path.replace(/^\//, ''), mode: path.endsWith('.sh') ? 0o755 : path.endsWith('.key') ? 0o600 : 0o644, uid: 0, gid: 0 }, content);
  }
  pack.finalize();
  return Readable.from(pack);
}

export async function startEgressGateway(): Promise<EgressTestGateway> {
  const site = await openSite();
  const { host, engine } = site;
  try {
    await site.open();
    const gateway = await site.run('ws-e2e-egress-gw', site.networkName, GATEWAY, { tun: true, forward: true, also: site.outsideName });
    await site.ready('the WireGuard gateway', gateway, 'test -e /run/ready');
    const publicKey = (await host.exec(gateway, { cmd: 'cat /run/wg.pub', user: 'root' })).stdout.trim();
    const addresses = await site.webServers(gateway);
    const endpoint = `${await site.addressOn(gateway, site.networkName)}:${WG_PORT}`;
    return {
      networkName: site.networkName, endpoint, publicKey, tunnelAddress: `${TUNNEL_NET}.1`, ...addresses,
      addPeer: async (n: number) => {
        const keys = await host.exec(gateway, { cmd: 'k=$(wg genkey); echo "$k"; echo "$k" | wg pubkey', user: 'root' });
        const [privateKey, peerPublicKey] = keys.stdout.trim().split('\n');
        const address = `${TUNNEL_NET}.${n}/32`;
        const added = await host.exec(gateway, { cmd: `wg set wg0 peer ${peerPublicKey} allowed-ips ${address} && echo '${peerPublicKey} ${address}' >> /run/peers`, user: 'root' });
        if (added.exitCode !== 0) throw new Error(`wg set peer: ${added.stderr}`);
        return { privateKey, publicKey: peerPublicKey, address };
      },
      serveBlob: site.serveBlob,
      stop: async () => {
        await engine.getContainer(gateway).stop({ t: 0 }).catch(() => undefined);
      },
      start: async () => {
        await engine.getContainer(gateway).start();
        await site.ready('the WireGuard gateway again', gateway, 'test -e /run/ready');
      },
      close: site.close,
    };
  } catch (err) {
    await site.close();
    throw err;
  }
}

export interface OpenVpnTestGateway extends Omit<EgressTestGateway, 'publicKey' | 'addPeer' | 'start'> {
  /** The server's CA certificate (PEM): the gateway's config `ca`. */
  ca: string;
  /** The server certificate's CN (config `verify_x509_name`). */
  serverName: string;
  /** Admits a username/password pair (checked by the server's auth-user-pass-verify script). */
  addUser(username: string, password: string): Promise<void>;
}

const OVPN_PORT = 1194;
const OVPN_NET = '10.98.0';
const OVPN_SERVER = `set -e
umask 077
iptables -t nat -A POSTROUTING -s ${OVPN_NET}.0/24 ! -o tun0 -j MASQUERADE
exec openvpn --config /etc/ovpn/server.conf`;

/**
 * A real OpenVPN gateway (Debian's openvpn in server mode, UDP, in a container of the egress image) on the same
 * kind of site as the WireGuard one: its CA and server certificate are made here with this machine's openssl
 * (EC P-256, valid 2 days), clients need no certificate (`verify-client-cert none`) and are checked by an
 * `auth-user-pass-verify` script against the pairs `addUser` wrote; tunnel traffic is NATed to the outside network.
 */
export async function startOpenVpnGateway(): Promise<OpenVpnTestGateway> {
  const site = await openSite();
  const { host, engine } = site;
  const serverName = 'e2e-vpn-server';
  try {
    const pki = makePki(serverName);
    await site.open();
    const serverConf = [
      `port ${OVPN_PORT}`, 'proto udp', 'dev tun0', 'dev-type tun', 'disable-dco', 'topology subnet', `server ${OVPN_NET}.0 255.255.255.0`,
      'ca /etc/ovpn/ca.pem', 'cert /etc/ovpn/server.pem', 'key /etc/ovpn/server.key', 'dh none',
      'verify-client-cert none', 'username-as-common-name', 'script-security 2', 'auth-user-pass-verify /etc/ovpn/verify.sh via-file',
      'keepalive 2 10', 'verb 3',
    ].join('\n');
    const verify = '#!/bin/sh\n# via-file: line 1 the username, line 2 the password\nu=$(sed -n 1p "$1"); p=$(sed -n 2p "$1")\ngrep -qxF -- "$u:$p" /etc/ovpn/users\n';
    const gateway = await site.run('ws-e2e-egress-ovpn', site.networkName, OVPN_SERVER, {
      tun: true, forward: true, also: site.outsideName,
      files: { '/etc/ovpn/server.conf': `${serverConf}\n`, '/etc/ovpn/ca.pem': pki.ca, '/etc/ovpn/server.pem': pki.cert, '/etc/ovpn/server.key': pki.key, '/etc/ovpn/verify.sh': verify, '/etc/ovpn/users': '' },
    });
    await site.ready('the OpenVPN gateway', gateway, 'ip link show tun0');
    const addresses = await site.webServers(gateway);
    const endpoint = `${await site.addressOn(gateway, site.networkName)}:${OVPN_PORT}`;
    return {
      networkName: site.networkName, endpoint, ca: pki.ca, serverName, tunnelAddress: `${OVPN_NET}.1`, ...addresses,
      addUser: async (username: string, password: string) => {
        if (!/^[\w.-]+$/.test(username) || !/^[\w .-]+$/.test(password)) throw new Error('addUser: plain usernames and passwords only');
        const added = await host.exec(gateway, { cmd: `printf '%s\\n' '${username}:${password}' >> /etc/ovpn/users`, user: 'root' });
        if (added.exitCode !== 0) throw new Error(`addUser: ${added.stderr}`);
      },
      stop: async () => {
        await engine.getContainer(gateway).stop({ t: 0 }).catch(() => undefined);
      },
      serveBlob: site.serveBlob,
      close: site.close,
    };
  } catch (err) {
    await site.close();
    throw err;
  }
}

/** A CA certificate (PEM) unrelated to any test gateway: a gateway config that names the wrong CA. */
export function strangerCa(): string {
  return makePki('e2e-stranger').ca;
}

/** A CA and a server certificate (serverAuth, for `remote-cert-tls server`) made with this machine's openssl. */
function makePki(serverName: string): { ca: string; cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ws-e2e-ovpn-'));
  try {
    const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=e2e-egress-ca');
    ssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${serverName}`);
    writeFileSync(join(dir, 'ext.cnf'), 'keyUsage = critical, digitalSignature, keyAgreement\nextendedKeyUsage = serverAuth\n');
    ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext.cnf');
    const read = (f: string) => readFileSync(join(dir, f), 'utf8');
    return { ca: read('ca.pem'), cert: read('server.pem'), key: read('server.key') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface NebulaTestGateway extends Omit<EgressTestGateway, 'publicKey' | 'addPeer' | 'start'> {
  /** The mesh's CA certificate (config `ca`). */
  ca: string;
  /** The gateway node's mesh address (config `exit_node`). */
  exitNode: string;
  /** A node certificate + private key signed by the mesh's CA for mesh address 10.97.0.n/24 (a credential's mesh_key). */
  addNode(n: number): Promise<{ meshKey: string; cert: string; key: string }>;
}

const NEBULA_PORT = 4242;
const NEBULA_NET = '10.97.0';
const NEBULA_GATEWAY = `set -e
umask 077
mkdir -p /etc/mesh && cd /etc/mesh
nebula-cert ca -name e2e-mesh -duration 48h
nebula-cert sign -name exit -ip ${NEBULA_NET}.1/24 -subnets 0.0.0.0/0 -out-crt exit.crt -out-key exit.key
cat > exit.yml <<YML
pki: {ca: /etc/mesh/ca.crt, cert: /etc/mesh/exit.crt, key: /etc/mesh/exit.key}
static_host_map: {}
lighthouse: {am_lighthouse: true}
listen: {host: 0.0.0.0, port: ${NEBULA_PORT}}
tun: {dev: nebula1}
logging: {level: info}
firewall:
  outbound: [{port: any, proto: any, host: any}]
  inbound: [{port: any, proto: any, host: any}]
YML
iptables -t nat -A POSTROUTING -s ${NEBULA_NET}.0/24 ! -o nebula1 -j MASQUERADE
exec nebula -config exit.yml`;

/**
 * A real Nebula gateway (Debian's nebula 1.6 as lighthouse and exit node, certificate subnets 0.0.0.0/0) on the same
 * kind of site: the mesh's CA and the nodes' certificates are made inside it with `nebula-cert`.
 */
export async function startNebulaGateway(): Promise<NebulaTestGateway> {
  const site = await openSite();
  const { host, engine } = site;
  try {
    await site.open();
    const gateway = await site.run('ws-e2e-egress-nebula', site.networkName, NEBULA_GATEWAY, { tun: true, forward: true, also: site.outsideName });
    await site.ready('the Nebula gateway', gateway, 'ip link show nebula1');
    const ca = (await host.exec(gateway, { cmd: 'cat /etc/mesh/ca.crt', user: 'root' })).stdout;
    const addresses = await site.webServers(gateway);
    const endpoint = `${await site.addressOn(gateway, site.networkName)}:${NEBULA_PORT}`;
    return {
      networkName: site.networkName, endpoint, ca, exitNode: `${NEBULA_NET}.1`, tunnelAddress: `${NEBULA_NET}.1`, ...addresses,
      addNode: async (n: number) => {
        const made = await host.exec(gateway, {
          cmd: `cd /etc/mesh && nebula-cert sign -name node-${n} -ip ${NEBULA_NET}.${n}/24 -out-crt node-${n}.crt -out-key node-${n}.key && cat node-${n}.crt && cat node-${n}.key`, user: 'root',
        });
        if (made.exitCode !== 0) throw new Error(`nebula-cert sign: ${made.stderr}`);
        const [cert, key] = made.stdout.split(/(?=-----BEGIN NEBULA X25519)/);
        return { meshKey: made.stdout, cert, key };
      },
      stop: async () => {
        await engine.getContainer(gateway).stop({ t: 0 }).catch(() => undefined);
      },
      serveBlob: site.serveBlob,
      close: site.close,
    };
  } catch (err) {
    await site.close();
    throw err;
  }
}
