import { configReader, EgressSidecarFiles, EgressSidecarInput, envLines, IP } from './egress-sidecar-common';

const DEV = /^[A-Za-z][A-Za-z0-9_-]{0,14}$/;

/**
 * custom: the gateway's `config.command` names a program of the sidecar image (an absolute path, with its arguments:
 * an array of strings, or one string without arguments) that the sidecar runs with the credential on standard input
 * as one line of JSON ({"username", "password", "vpn_private_key", "mesh_key", "custom_credential"}: the fields the
 * credential has) and an environment of its own without secrets (EGRESS_ENDPOINT, EGRESS_DEV). It must bring up the
 * interface `config.interface` (default tun0): the tunnel is up while that interface is up. `endpoint` (host:port)
 * and `config.proto` (udp | tcp, default udp) open the kill switch for the command's own connection; `dns` optional.
 */
export function customFiles(input: EgressSidecarInput): EgressSidecarFiles {
  const { config, bad, list, oneOf, optional, endpoint } = configReader(input);
  const raw = config.command;
  const command = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(command) || !command.length || command.some((a) => typeof a !== 'string' || a.includes('\0') || a.length > 4096)) {
    throw bad('config.command must name a program of the sidecar image (an array of strings: its path and arguments)');
  }
  if (!/^\/[^\s]+$/.test(command[0])) throw bad('config.command must start with the program\'s absolute path');
  const dev = optional('interface', DEV, 'an interface name') ?? 'tun0';
  const ep = endpoint();
  const proto = oneOf('proto', ['udp', 'tcp'] as const, 'udp');
  const dns = list('dns', IP, 'IP addresses');
  const c = input.credential;
  const credential = Object.fromEntries(
    Object.entries({ username: c.username, password: c.password, vpn_private_key: c.vpnPrivateKey, mesh_key: c.meshKey, custom_credential: c.customCredential })
      .filter((e) => typeof e[1] === 'string'),
  );
  return {
    files: {
      // NUL-separated: the entrypoint reads it with `mapfile -d ''`, so no argument is ever split or re-parsed.
      command: { content: command.map((a) => `${a}\0`).join(''), mode: 0o644 },
      credential: { content: `${JSON.stringify(credential)}\n`, mode: 0o600 },
      'tunnel.env': { content: envLines({ ENDPOINT: ep, PROTO: proto, DEV: dev, DNS: dns.join(',') }), mode: 0o644 },
    },
  };
}
