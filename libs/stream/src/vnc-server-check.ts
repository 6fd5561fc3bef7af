import { RfbClient } from './rfb-client';
import { RfbError, RfbErrorKind } from './errors';

export type VncServerCheck =
  | { ok: true; width: number; height: number; name: string }
  | { ok: false; kind: RfbErrorKind | 'error'; operationalMessage: string };

/**
 * Whether an existing VNC server (a server image's target, issue 14) answers RFB and takes the password, within
 * timeoutMs: a full handshake up to ServerInit, then the connection is closed. Never throws; a failure carries the
 * operational_message a failed workspace shows (the password never appears in it).
 */
export async function checkVncServer(host: string, port: number, password: string, timeoutMs: number): Promise<VncServerCheck> {
  const where = `VNC server ${host}:${port}`;
  let client: RfbClient | undefined;
  try {
    client = await RfbClient.connect(host, port, { password: password || undefined, timeoutMs, shared: true });
    return { ok: true, width: client.info.width, height: client.info.height, name: client.info.name };
  } catch (error) {
    if (!(error instanceof RfbError)) return { ok: false, kind: 'error', operationalMessage: `${where} could not be checked: ${(error as Error).message}` };
    const messages: Record<RfbErrorKind, string> = {
      connection_refused: `${where} refused the connection (nothing listens there)`,
      connection_failed: `${where} is unreachable (${error.message})`,
      timeout: `${where} did not answer RFB within ${Math.round(timeoutMs / 1000)} s`,
      auth_failed: `${where} refused the credentials (wrong password)`,
      auth_required: `${where} requires a password, and none is stored or given`,
      unsupported_security: `${where} offers no supported security type (VNC Authentication or None)`,
      protocol: `${where} does not speak RFB (${error.message})`,
      closed: `${where} closed the connection during the handshake`,
    };
    return { ok: false, kind: error.kind, operationalMessage: messages[error.kind] };
  } finally {
    await client?.close().catch(() => undefined);
  }
}
