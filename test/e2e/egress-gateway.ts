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
 */
import Docker from 'dockerode';
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
rm -f /run/ready
[ -s /run/wg.key ] || wg genkey > /run/wg.key
WG_PROCESS_FOREGROUND=1 wireguard-go wg0 &
for _ in $(seq 100); do [ -e /sys/class/net/wg0 ] && break; sleep 0.1; done
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

export async function startEgressGateway(): Promise<EgressTestGateway> {
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
  const run = async (name: string, network: string, cmd: string, opts: { env?: string[]; tun?: boolean; forward?: boolean; also?: string } = {}) => {
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
    await c.start();
    return c.id;
  };
  const addressOn = async (id: string, network: string) => {
    const info = await engine.getContainer(id).inspect();
    const ip = info.NetworkSettings.Networks[network]?.IPAddress;
    if (!ip) throw new Error(`container ${id} has no address on ${network}`);
    return ip;
  };
  try {
    await engine.createNetwork({ Name: networkName, Driver: 'bridge', Labels: label, Options: { 'com.docker.network.bridge.host_binding_ipv4': '127.0.0.1' } });
    made.networks.push(networkName);
    await engine.createNetwork({ Name: outsideName, Driver: 'bridge', Internal: true, Labels: label });
    made.networks.push(outsideName);
    const gateway = await run('ws-e2e-egress-gw', networkName, GATEWAY, { tun: true, forward: true, also: outsideName });
    await waitFor('the WireGuard gateway', async () => (await host.exec(gateway, { cmd: 'test -e /run/ready', user: 'root' })).exitCode === 0 || undefined, 20_000, 100);
    const publicKey = (await host.exec(gateway, { cmd: 'cat /run/wg.pub', user: 'root' })).stdout.trim();
    const exitAddress = await addressOn(gateway, outsideName);
    const outside = await run('ws-e2e-egress-outside', outsideName, WEB_SERVER, { env: [`ALLOW=${exitAddress}`] });
    const canary = await run('ws-e2e-egress-canary', networkName, WEB_SERVER);
    const outsideAddress = await addressOn(outside, outsideName);
    const canaryAddress = await addressOn(canary, networkName);
    const endpoint = `${await addressOn(gateway, networkName)}:${WG_PORT}`;
    for (const id of [outside, canary]) {
      await waitFor('a web server of the egress gateway', async () => (await host.exec(id, { cmd: `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${HTTP_PORT}'`, user: 'root' })).exitCode === 0 || undefined, 20_000, 100);
    }
    return {
      networkName, endpoint, publicKey, tunnelAddress: `${TUNNEL_NET}.1`, exitAddress, outsideAddress, canaryAddress,
      addPeer: async (n: number) => {
        const keys = await host.exec(gateway, { cmd: 'k=$(wg genkey); echo "$k"; echo "$k" | wg pubkey', user: 'root' });
        const [privateKey, peerPublicKey] = keys.stdout.trim().split('\n');
        const address = `${TUNNEL_NET}.${n}/32`;
        const added = await host.exec(gateway, { cmd: `wg set wg0 peer ${peerPublicKey} allowed-ips ${address} && echo '${peerPublicKey} ${address}' >> /run/peers`, user: 'root' });
        if (added.exitCode !== 0) throw new Error(`wg set peer: ${added.stderr}`);
        return { privateKey, publicKey: peerPublicKey, address };
      },
      serveBlob: async (bytes: number) => {
        for (const id of [outside, canary]) {
          const made = await host.exec(id, { cmd: `head -c ${Math.floor(bytes)} /dev/urandom > /tmp/www/blob`, user: 'root' });
          if (made.exitCode !== 0) throw new Error(`blob: ${made.stderr}`);
        }
      },
      stop: async () => {
        await engine.getContainer(gateway).stop({ t: 0 }).catch(() => undefined);
      },
      start: async () => {
        await engine.getContainer(gateway).start();
        await waitFor('the WireGuard gateway again', async () => (await host.exec(gateway, { cmd: 'test -e /run/ready', user: 'root' })).exitCode === 0 || undefined, 20_000, 100);
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
