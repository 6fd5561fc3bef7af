import { Injectable } from '@nestjs/common';
import { addSeconds, ApiError, AppConfig, ErrorCode, formatTimestamp, toWireId } from '@ws/common';
import {
  Image, ServerCredentialCipher, ServerCredentialError, ServerImagesService, checkTargetHost, resolveConnection, sessionModeOf, TargetAddressPolicy,
} from '@ws/images';
import { mintRelayCredential, rdpFile, rdpUrl } from './rdp-client-connection';
import { operationalStatus } from '@ws/workspaces';
import type { VncEndpoint, Workspace, WorkspaceServerConnection } from '@ws/workspaces';

/** get_rdp_client_connection_info's answer (docs/decisions.md, "Server sessions"). */
export interface RdpClientConnectionInfo {
  /** A .rdp file for mstsc, FreeRDP and the Remote Desktop apps. */
  file: string;
  /** The same as an rdp:// url. */
  url: string;
  host: string;
  port: number;
  username: string;
  /** Until when the credential in file and url admits a new connection (connections made stay open). */
  expires: string;
}

/**
 * Server sessions (issue 14): which server a request for a server image reaches, its password sealed to the
 * workspace (AES-256-GCM bound to the workspace id), and where each kind of workspace's VNC stream is.
 */
@Injectable()
export class WorkspaceServerSessions {
  private readonly cipher: ServerCredentialCipher;
  readonly targets: TargetAddressPolicy;

  constructor(
    private readonly config: AppConfig,
    private readonly serverImages: ServerImagesService,
  ) {
    this.cipher = new ServerCredentialCipher(config.SERVER_CREDENTIALS_KEY);
    this.targets = new TargetAddressPolicy(config);
  }

  /**
   * The connection a request for a server image makes: the image's target, the request's connection_info where
   * the image allows it, rdp_client_type against the image's client option (each a clear 400), and its password
   * ('' for a native RDP client's relay, which never uses one).
   */
  async resolve(image: Image, request: { connection_info?: unknown; rdp_client_type?: unknown }, username: string): Promise<{ connection: WorkspaceServerConnection; password: string }> {
    let stored: Awaited<ReturnType<ServerImagesService['targetOf']>>;
    try {
      stored = await this.serverImages.targetOf(image.id);
    } catch (err) {
      // Only an unreadable password is the image's problem; a database failure stays what it is (503).
      if (!(err instanceof ServerCredentialError)) throw err;
      throw new ApiError(ErrorCode.InvalidState, `Image ${image.friendlyName} (${toWireId(image.id)}): ${(err as Error).message}; store the password again (image add-server --password-stdin)`);
    }
    const { password, ...resolved } = resolveConnection(stored.target, stored.password, request, username);
    // The target's address against the operator's policy (the worker checks again, after its own lookup): a
    // request's host is the caller's 400, the image's own host (stored before the policy changed) the image's 409.
    const overridden = (request.connection_info as { host?: unknown } | undefined)?.host !== undefined;
    await checkTargetHost(this.targets, resolved.host, overridden ? 'connection_info.host' : `Image ${image.friendlyName} (${toWireId(image.id)}): host`,
      overridden ? ErrorCode.InvalidRequest : ErrorCode.InvalidState);
    const connection: WorkspaceServerConnection = { ...resolved, mode: sessionModeOf(resolved) };
    if (connection.mode !== 'direct' && !this.config.SERVER_BRIDGE_IMAGE) {
      throw new ApiError(ErrorCode.InvalidState, `${connection.protocol.toUpperCase()} servers are reached through a bridge container, and SERVER_BRIDGE_IMAGE is not set on this deployment`);
    }
    // A relay passes the RDP stream through and the user answers the server's own logon: its password is not kept.
    const kept = connection.mode === 'relay' ? '' : password;
    if (kept !== '' && !this.cipher.configured) {
      throw new ApiError(ErrorCode.InvalidRequest, 'SERVER_CREDENTIALS_KEY is not set: a server password is kept for the workspace only encrypted, so the operator must set a key first');
    }
    return { connection, password: kept };
  }

  /** The password as the workspace row keeps it: encrypted, bound to the workspace id; null when there is none. */
  seal(password: string, workspaceId: string): string | null {
    return password === '' ? null : this.cipher.encrypt(password, workspaceId);
  }

  /**
   * The server password of a server workspace ('' when none). A 409 when it no longer decrypts (SERVER_CREDENTIALS_KEY
   * changed since the request): the screenshot and the stream gateway answer it as such, not as a 500 or a 502.
   */
  passwordOf(workspace: Pick<Workspace, 'id' | 'serverPasswordEncrypted'>): string {
    if (!workspace.serverPasswordEncrypted) return '';
    try {
      return this.cipher.decrypt(workspace.serverPasswordEncrypted, workspace.id);
    } catch (err) {
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${toWireId(workspace.id)}): ${(err as Error).message}; request a new workspace`);
    }
  }

  /** The key of a relay workspace's credentials (its own column; never the token, which the Workspace object shows). */
  relaySecretOf(workspace: Pick<Workspace, 'id' | 'relaySecret'>): string {
    if (!workspace.relaySecret) throw new ApiError(ErrorCode.InvalidState, `Workspace (${toWireId(workspace.id)}) has no relay key`);
    return workspace.relaySecret;
  }

  /**
   * The VNC server the gateway and screenshots talk to: a VNC server image's server itself (direct), else the
   * workspace container's published port with the workspace token as password; null when the workspace has no VNC
   * stream (an RDP relay for native clients) or none yet.
   */
  vncEndpointOf(workspace: Pick<Workspace, 'id' | 'serverConnection' | 'serverPasswordEncrypted' | 'hostPorts' | 'token'> & { server?: { publishHost: string } | null }): VncEndpoint | null {
    const connection = workspace.serverConnection;
    if (connection?.mode === 'direct') {
      // The address the worker checked, never the name again; a workspace provisioned before addresses were kept has
      // none, and is streamed only when its host is itself an allowed address.
      const address = connection.address ?? connection.host;
      const check = this.targets.checkLiteral(address);
      if (!check?.allowed) throw new ApiError(ErrorCode.InvalidState, `Workspace (${toWireId(workspace.id)}): its VNC server ${connection.host}:${connection.port} is not an allowed server target; request a new workspace`);
      return { host: check.address, port: connection.port, password: this.passwordOf(workspace) };
    }
    if (connection?.mode === 'relay') return null;
    const port = workspace.hostPorts.vnc;
    return workspace.server && port ? { host: workspace.server.publishHost, port, password: workspace.token } : null;
  }

  /**
   * get_rdp_client_connection_info: where a native RDP client reaches the workspace's relay, with a fresh credential
   * that admits new connections for RDP_CLIENT_CREDENTIAL_TTL_SECONDS. The server's password is never part of it:
   * the relay holds none, and the user answers the server's own logon.
   */
  rdpClientConnection(workspace: Workspace, now = new Date()): RdpClientConnectionInfo {
    const id = toWireId(workspace.id);
    const connection = workspace.serverConnection;
    if (connection?.mode !== 'relay') throw new ApiError(ErrorCode.InvalidRequest, `Workspace (${id}) is not reached with a native RDP client (request_workspace with rdp_client_type RDP_CLIENT on an RDP server image)`);
    const port = workspace.hostPorts.rdp;
    if (workspace.status !== 'running' || !workspace.server || !port) throw new ApiError(ErrorCode.InvalidState, `Workspace (${id}) is not running (${operationalStatus(workspace.status)})`);
    // Published on every address of the Docker host: clients reach it by the host's name.
    const host = ['0.0.0.0', '::'].includes(workspace.server.publishHost) ? workspace.server.hostname : workspace.server.publishHost;
    const expires = addSeconds(now, this.config.RDP_CLIENT_CREDENTIAL_TTL_SECONDS);
    const target = { host, port, username: connection.username, domain: connection.domain, credential: mintRelayCredential(this.relaySecretOf(workspace), id, expires) };
    return { file: rdpFile(target), url: rdpUrl(target), host, port, username: connection.username, expires: formatTimestamp(expires) };
  }
}
