/**
 * The two RFB handshakes this code base takes part in, as parsers, each stopping before ClientInit: the client
 * side toward a VNC server (the RfbClient, and the stream gateway toward the workspace), and the gateway's server
 * side toward the browser, which offers security None only. The gateway's two run here over its connections.
 */
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import { vncAuthResponse } from './des';
import { RfbError } from './errors';
import { Need, read } from './feeder';
import { ParserRunner } from './parser-runner';
import { RfbMinorVersion, SECURITY_NONE, SECURITY_VNC_AUTH, flowForVersion, parseProtocolVersion, protocolError, readReasonString } from './rfb-messages';

type Reader<T> = Generator<Need, T, Buffer | undefined>;

export interface NegotiatedSecurity {
  /** The server's ProtocolVersion, e.g. "RFB 003.008". */
  serverVersion: string;
  /** The flow we replied with (the lower of the server's and 3.8). */
  flow: RfbMinorVersion;
  securityType: number;
}

/**
 * Version and security as a client (RFC 6143 §7.1–7.2): VNC Authentication when a password is given and the
 * server offers it, else None, else VNC Authentication (which then needs the password). Failures are RfbError:
 * connection_failed, unsupported_security, auth_required, auth_failed, protocol.
 */
export function* negotiateAsClient(password: string | undefined, write: (bytes: Buffer) => void): Reader<NegotiatedSecurity> {
  const serverVersion = parseProtocolVersion(yield* read(12));
  const flow = flowForVersion(serverVersion.major, serverVersion.minor);
  write(Buffer.from(`RFB 003.00${flow}\n`, 'latin1'));

  let securityType: number;
  if (flow === 3) {
    securityType = (yield* read(4)).readUInt32BE(0);
    if (securityType === 0) {
      const { text } = yield* readReasonString();
      throw new RfbError('connection_failed', `server refused the connection: ${text}`, text);
    }
  } else {
    const count = (yield* read(1))[0];
    if (count === 0) {
      const { text } = yield* readReasonString();
      throw new RfbError('unsupported_security', `server offers no security type: ${text}`, text);
    }
    const types = [...(yield* read(count))];
    if (password !== undefined && types.includes(SECURITY_VNC_AUTH)) securityType = SECURITY_VNC_AUTH;
    else if (types.includes(SECURITY_NONE)) securityType = SECURITY_NONE;
    else if (types.includes(SECURITY_VNC_AUTH)) securityType = SECURITY_VNC_AUTH;
    else throw new RfbError('unsupported_security', `server offers only security types ${types.join(', ')}`);
    write(Buffer.from([securityType]));
  }
  if (securityType === SECURITY_VNC_AUTH) {
    if (password === undefined) throw new RfbError('auth_required', 'server requires VNC authentication but no password was given');
    write(vncAuthResponse(password, yield* read(16)));
  } else if (securityType !== SECURITY_NONE) {
    throw new RfbError('unsupported_security', `server chose security type ${securityType}`);
  }
  if (flow === 8 || securityType === SECURITY_VNC_AUTH) {
    const status = (yield* read(4)).readUInt32BE(0);
    if (status !== 0) {
      const reason = flow === 8 ? (yield* readReasonString()).text : 'authentication failed';
      throw new RfbError('auth_failed', `VNC authentication failed: ${reason}`, reason);
    }
  }
  return { serverVersion: serverVersion.text, flow, securityType };
}

/**
 * Version and security as a server offering None only: the stream gateway toward the browser, which its session
 * token authenticated and which must never learn the VNC password.
 */
export function* acceptWithoutSecurity(write: (bytes: Buffer) => void): Reader<void> {
  write(Buffer.from('RFB 003.008\n', 'latin1'));
  const version = parseProtocolVersion(yield* read(12));
  const flow = flowForVersion(version.major, version.minor);
  if (flow === 3) {
    write(Buffer.from([0, 0, 0, SECURITY_NONE])); // 3.3: the server picks; no SecurityResult for None
    return;
  }
  write(Buffer.from([1, SECURITY_NONE]));
  const choice = (yield* read(1))[0];
  if (choice !== SECURITY_NONE) throw protocolError(`the browser chose security type ${choice}`);
  if (flow === 8) write(Buffer.from([0, 0, 0, 0]));
}

/**
 * The stream gateway toward the workspace's VNC server: version and security with the workspace's password (an
 * empty one is none). Stops before ClientInit, which the browser sends through the proxy.
 */
export async function authenticateToServer(socket: Socket, password: string, timeoutMs: number): Promise<void> {
  const runner = new ParserRunner();
  const onData = (chunk: Buffer) => runner.push(chunk);
  const onEnd = () => runner.end(new RfbError('closed', 'the VNC server closed the connection during the handshake'));
  const onError = (error: Error) => runner.end(new RfbError('connection_failed', `VNC server: ${error.message}`));
  socket.on('data', onData).on('end', onEnd).on('error', onError);
  try {
    await runner.run(negotiateAsClient(password || undefined, (bytes) => socket.write(bytes)), Date.now() + timeoutMs, 'the VNC server handshake');
    if (runner.pending) throw protocolError('the VNC server sent data before ClientInit');
  } finally {
    socket.off('data', onData).off('end', onEnd).off('error', onError);
  }
}

/** The stream gateway toward the browser (acceptWithoutSecurity). Stops before ClientInit. */
export async function greetBrowser(ws: WebSocket, timeoutMs: number): Promise<void> {
  const runner = new ParserRunner();
  const onMessage = (data: Buffer | ArrayBuffer | Buffer[]) => runner.push(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));
  const onClose = () => runner.end(new RfbError('closed', 'the browser closed the connection during the handshake'));
  ws.on('message', onMessage).on('close', onClose);
  try {
    await runner.run(acceptWithoutSecurity((bytes) => ws.send(bytes)), Date.now() + timeoutMs, 'the browser handshake');
    if (runner.pending) throw protocolError('the browser sent data before the handshake finished');
  } finally {
    ws.off('message', onMessage).off('close', onClose);
  }
}
