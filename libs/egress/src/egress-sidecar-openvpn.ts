import { configReader, EgressSidecarFiles, EgressSidecarInput, envLines, IP } from './egress-sidecar-common';

const PEM_CERTS = /^(?:-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+\n-----END CERTIFICATE-----\n*)+$/;
const STATIC_KEY = /^-----BEGIN OpenVPN Static key V1-----\n[0-9a-fA-F\n]+\n-----END OpenVPN Static key V1-----\n*$/;
const NAME_LIST = /^[A-Za-z0-9-]+(?::[A-Za-z0-9-]+)*$/;
const X509_NAME = /^[A-Za-z0-9._@-]{1,128}$/;

/**
 * username_password_vpn (OpenVPN client, `auth-user-pass`): the credential's `username` and `password` (0600 file),
 * the gateway's `endpoint` (host:port) and its `config`: `ca` (the server's CA certificate(s), PEM, required),
 * `proto` (udp | tcp, default udp), `verify_x509_name` (the server certificate's CN, optional), `data_ciphers`
 * (e.g. "AES-256-GCM:AES-128-GCM", optional), `auth` (HMAC digest, optional), `tls_crypt` / `tls_auth` (the
 * server's static key, PEM, optional; 0600), `redirect_gateway` (default true: everything through the tunnel),
 * `dns` (optional), `tun_mtu` (optional). The client config is built here from these checked values only (no
 * operator text reaches it), so no `up`/`script` directive can be slipped in.
 */
export function openvpnFiles(input: EgressSidecarInput): EgressSidecarFiles {
  const { config, bad, list, int, oneOf, optional, endpoint } = configReader(input);
  const { username, password } = input.credential;
  const oneLine = (v: string | null | undefined) => !!v && !/[\r\n\0]/.test(v) && v.length <= 1024;
  if (!oneLine(username) || !oneLine(password)) throw bad('the credential needs a username and a password of one line each');
  const pem = (name: string, re: RegExp, what: string): string | undefined => {
    const v = config[name];
    if (v === undefined || v === null) return undefined;
    const text = typeof v === 'string' ? `${v.replace(/\r\n/g, '\n').trim()}\n` : '';
    if (!re.test(text)) throw bad(`config.${name} must be ${what}`);
    return text;
  };
  const ep = endpoint();
  const ca = pem('ca', PEM_CERTS, 'the server\'s CA certificate (PEM)');
  if (!ca) throw bad('config.ca is required (the server\'s CA certificate, PEM)');
  const proto = oneOf('proto', ['udp', 'tcp'] as const, 'udp');
  const verifyName = optional('verify_x509_name', X509_NAME, 'a certificate name');
  const ciphers = optional('data_ciphers', NAME_LIST, 'cipher names separated by ":"');
  const auth = optional('auth', NAME_LIST, 'a digest name');
  const tlsCrypt = pem('tls_crypt', STATIC_KEY, 'an OpenVPN static key');
  const tlsAuth = pem('tls_auth', STATIC_KEY, 'an OpenVPN static key');
  if (tlsCrypt && tlsAuth) throw bad('config.tls_crypt and config.tls_auth exclude each other');
  const redirect = config.redirect_gateway ?? true;
  if (typeof redirect !== 'boolean') throw bad('config.redirect_gateway must be true or false');
  const dns = list('dns', IP, 'IP addresses');
  const mtu = config.tun_mtu === undefined ? undefined : int('tun_mtu', 1500, 9000);
  const conf = [
    'client', 'nobind', `proto ${proto === 'tcp' ? 'tcp-client' : 'udp'}`,
    'ca /etc/egress/openvpn-ca.pem', 'remote-cert-tls server', ...(verifyName ? [`verify-x509-name ${verifyName} name`] : []),
    'auth-user-pass /etc/egress/openvpn.auth', 'auth-nocache', 'auth-retry none',
    ...(ciphers ? [`data-ciphers ${ciphers}`] : []), ...(auth ? [`auth ${auth}`] : []),
    ...(tlsCrypt ? ['tls-crypt /etc/egress/openvpn-tls.key'] : []), ...(tlsAuth ? ['tls-auth /etc/egress/openvpn-tls.key 1'] : []),
    ...(redirect ? ['redirect-gateway def1'] : []), ...(mtu ? [`tun-mtu ${mtu}`] : []),
    'verb 3',
  ];
  const files: EgressSidecarFiles['files'] = {
    'openvpn.conf': { content: `${conf.join('\n')}\n`, mode: 0o644 },
    'openvpn-ca.pem': { content: ca, mode: 0o644 },
    'openvpn.auth': { content: `${username}\n${password}\n`, mode: 0o600 },
    'tunnel.env': { content: envLines({ ENDPOINT: ep, PROTO: proto, DEV: 'tun0', DNS: dns.join(',') }), mode: 0o644 },
  };
  const tls = tlsCrypt ?? tlsAuth;
  if (tls) files['openvpn-tls.key'] = { content: tls, mode: 0o600 };
  return { files };
}
