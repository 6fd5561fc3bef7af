import { RfbClient } from './rfb-client';
import { RfbError, RfbErrorKind } from './errors';

export type VncServerCheck =
  | { ok: true; width: number; height: number; name: string }
  /** `detail`: what went wrong, for the operator's log only (it may quote the target); never in operationalMessage. */
  | { ok: false; kind: RfbErrorKind | 'error'; operationalMessage: string; detail?: string };

/**
 * Whether an existing VNC server (a server image's target, issue 14) answers RFB and takes the password, within
 * timeoutMs: a full handshake up to ServerInit, then the connection is closed. Never throws; a failure carries the
 * operational_message a failed workspace shows (the password never appears in it). `address` is what to connect
 * to (the checked address `host` resolved to); `host` names the server in messages.
 *
 * The message tells only what a completed RFB exchange proved (wrong or missing password, no usable security
 * type): a refused, a silent and an open port of another service read alike, and no byte the target sent is
 * quoted (issue 19, hole 7: the check must not serve as a port scanner or a banner grabber).
 */
export async function checkVncServer(host: string, port: number, password: string, timeoutMs: number, address = host): Promise<VncServerCheck> {
  const where = `VNC server ${host}:${port}`;
  let client: RfbClient | undefined;
  try {
    client = await RfbClient.connect(address, port, { password: password || undefined, timeoutMs, shared: true });
    return { ok: true, width: client.info.width, height: client.info.height, name: client.info.name };
  } catch (error) {
    const unreachable = `Could not connect to the ${where}, or it did not answer as a VNC server`;
    if (!(error instanceof RfbError)) return { ok: false, kind: 'error', operationalMessage: unreachable, detail: (error as Error).message };
    const afterHandshake: Partial<Record<RfbErrorKind, string>> = {
      auth_failed: `${where} refused the credentials (wrong password)`,
      auth_required: `${where} requires a password, and none is stored or given`,
      unsupported_security: `${where} offers no supported security type (VNC Authentication or None)`,
    };
    return { ok: false, kind: error.kind, operationalMessage: afterHandshake[error.kind] ?? unreachable, detail: `${error.kind}: ${error.message}` };
  } finally {
    await client?.close().catch(() => undefined);
  }
}
