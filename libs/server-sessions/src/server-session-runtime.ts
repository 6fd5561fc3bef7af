import { Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import * as tar from 'tar-stream';
import { buildContainerSpec, DockerHost, WorkspaceContainerSpec } from '@ws/agent';
import { AppConfig } from '@ws/common';
import { Image } from '@ws/images';
import { PermanentFailure } from '@ws/queue';
import { Server } from '@ws/servers';
import { checkVncServer } from '@ws/stream';
import { Workspace, WorkspaceLifecycle } from '@ws/workspaces';
import type { WorkspaceServerConnection } from '@ws/workspaces';
import { WorkspaceServerSessions } from './workspace-server-sessions.service';

/** The bridge image reads its connection from /etc/workspace-bridge/connection (images/bridge: workspace-bridge, workspace-rdp-relay). */
const BRIDGE_CONNECTION_PARENT = '/etc';
const BRIDGE_CONNECTION_DIR = 'workspace-bridge';
/** One line the bridge rewrites: `connecting`, `connected` or `failed <message>`. */
const BRIDGE_STATUS_FILE = '/tmp/workspace-bridge/status';
/** The relay's port inside its container (published like a workspace's VNC port). */
export const RELAY_CONTAINER_PORT = 3389;
/** The bridge image's user: the connection file is readable by it alone. */
const BRIDGE_UID = 1000;
/** How long a VNC server, a bridge's client or a relay's first reach of its server may take to answer. */
const CONNECT_TIMEOUT_MS = 20_000;
/** How long a bridge may take from its desktop answering to its client connected (xfreerdp's own logon included). */
const BRIDGE_CONNECTED_TIMEOUT_MS = 90_000;
/** The status file is read with `docker exec` (three Docker calls): often at first, then at most once a second. */
const STATUS_POLL_FIRST_MS = 150;
const STATUS_POLL_MAX_MS = 1000;

const b64 = (value: string) => Buffer.from(value, 'utf8').toString('base64');

/**
 * What a workspace says when its server could not be reached or did not speak its protocol: one message for a
 * closed, a silent and an open port of another service, and never a byte the target sent (issue 19, hole 7).
 */
export function unreachableMessage(connection: Pick<WorkspaceServerConnection, 'protocol' | 'host' | 'port'>): string {
  const protocol = connection.protocol.toUpperCase();
  return `Could not connect to the ${protocol} server ${connection.host}:${connection.port}, or it did not answer as ${protocol === 'RDP' ? 'an' : 'a'} ${protocol} server`;
}

/**
 * The bridge's failures that come after its client spoke the protocol with the server (the logon's answer), which
 * the integrator needs and which tell nothing a successful launch would not; workspace-bridge writes them as
 * `The RDP|SSH server <address>:<port> <outcome>`.
 */
const BRIDGE_LOGON_OUTCOMES = new Set([
  'refused the username or password', 'denied access to this user', 'reports that the account is locked out', 'reports that the account is disabled',
  'reports that the account has expired', 'does not let this account log on now (account restriction)', 'reports that the password has expired',
  'requires the password to be changed before logging on', 'refused the user the right to log on remotely', 'requires a username and password',
  'presented a different host key than before',
]);
/** The bridge's and relay's own words about a connection file they cannot use (our settings, no server bytes). */
const BRIDGE_SETUP_FAILURE = /^(The server-session connection settings are invalid|The RDP relay is not configured correctly): [ -~]{0,300}$/;

/** A bridge's `failed …` text as the workspace's message: a logon outcome or a setup failure as such, anything else as unreachable. */
export function bridgeFailureMessage(text: string, connection: Pick<WorkspaceServerConnection, 'protocol' | 'host' | 'port'>): string {
  const outcome = /^The (?:RDP|SSH) server \S+ (.+)$/.exec(text)?.[1];
  if (outcome !== undefined && BRIDGE_LOGON_OUTCOMES.has(outcome)) return `The ${connection.protocol.toUpperCase()} server ${connection.host}:${connection.port} ${outcome}`;
  if (BRIDGE_SETUP_FAILURE.test(text)) return text;
  return unreachableMessage(connection);
}

/**
 * The worker's side of server sessions (issue 14): a VNC server is checked and used directly; RDP and SSH servers
 * get a bridge container (the desktop image running xfreerdp or ssh), native RDP clients a relay container. Both
 * containers are built like any workspace's (one name per workspace id, adopted on retry) and read their
 * connection from a file written before they start, never from their environment.
 */
@Injectable()
export class ServerSessionRuntime {
  private readonly logger = new Logger(ServerSessionRuntime.name);

  constructor(
    private readonly config: AppConfig,
    private readonly sessions: WorkspaceServerSessions,
    private readonly lifecycle: WorkspaceLifecycle,
  ) {}

  /**
   * The target resolved here, at connection time, and every address checked against the operator's policy
   * (TargetAddressPolicy): the address is kept on the workspace, and the check, the bridge, the relay and the
   * gateway connect to it, never to the name again (a name that answered a public address at request time and a
   * loopback one now is refused; one that changes after this check changes nothing).
   */
  async checkedTarget(workspace: Workspace, connection: WorkspaceServerConnection): Promise<WorkspaceServerConnection & { address: string }> {
    const check = await this.sessions.targets.resolve(connection.host, CONNECT_TIMEOUT_MS);
    if (check.allowed === 'unresolved') {
      // The operator's log says why; the workspace's message does not tell a missing name from a closed port.
      this.logger.warn(`workspace ${workspace.id}: ${connection.host} did not resolve (${check.error})`);
      throw new PermanentFailure(unreachableMessage(connection));
    }
    if (!check.allowed) {
      const verb = this.sessions.targets.checkLiteral(connection.host) ? 'is' : 'resolves to';
      throw new PermanentFailure(`The ${connection.protocol.toUpperCase()} server ${connection.host}:${connection.port} is not an allowed server target: it ${verb} ${check.reason}`);
    }
    const checked = { ...connection, address: check.address };
    await this.lifecycle.keepServerAddress(workspace.id, checked);
    workspace.serverConnection = checked;
    return checked;
  }

  /** A VNC server image's workspace: the server must answer RFB and take the password; its failure is the workspace's message. */
  async checkDirect(workspace: Workspace, connection: WorkspaceServerConnection): Promise<void> {
    let password: string;
    try {
      password = this.sessions.passwordOf(workspace);
    } catch (err) {
      throw new PermanentFailure((err as Error).message); // SERVER_CREDENTIALS_KEY changed since the request: no retry helps
    }
    const { address } = await this.checkedTarget(workspace, connection);
    const check = await checkVncServer(connection.host, connection.port, password, CONNECT_TIMEOUT_MS, address);
    if (!check.ok) {
      if (check.detail) this.logger.warn(`workspace ${workspace.id}: VNC server ${connection.host}:${connection.port} (${address}): ${check.detail}`);
      throw new PermanentFailure(check.operationalMessage);
    }
  }

  /** The bridge's or relay's container: the bridge image on SERVER_BRIDGE_NETWORK (or the image's own network). */
  containerSpec(workspace: Workspace, image: Image, server: Server, connection: WorkspaceServerConnection): WorkspaceContainerSpec {
    if (!this.config.SERVER_BRIDGE_IMAGE) throw new PermanentFailure('SERVER_BRIDGE_IMAGE is not set: RDP and SSH servers are reached through a bridge container');
    const spec = buildContainerSpec({
      // A relay streams no desktop: no VNC_PASSWORD.
      workspace: { id: workspace.id, cores: workspace.cores, memory: workspace.memory, token: connection.mode === 'relay' ? '' : workspace.token, environment: {} },
      image: { id: image.id, name: this.config.SERVER_BRIDGE_IMAGE, xRes: image.xRes, yRes: image.yRes, restrictToNetwork: image.restrictToNetwork, networkName: image.networkName },
      server, deploymentId: this.config.DEPLOYMENT_ID, network: this.config.SERVER_BRIDGE_NETWORK,
      clientLanguage: workspace.launchOptions.clientLanguage, clientTimezone: workspace.launchOptions.clientTimezone,
    });
    if (connection.mode !== 'relay') return spec;
    return { ...spec, ports: { rdp: `${RELAY_CONTAINER_PORT}/tcp` }, cmd: ['/usr/local/bin/workspace-rdp-relay'] };
  }

  /** Writes the connection file into the created, not yet started container (Docker archive API). */
  async writeConnection(host: DockerHost, containerId: string, workspace: Workspace, connection: WorkspaceServerConnection): Promise<void> {
    const relay = connection.mode === 'relay';
    // The checked address, not the name: the bridge's client and the relay never look it up again.
    const { address } = await this.checkedTarget(workspace, connection);
    const lines = [
      `PROTOCOL=${relay ? 'relay' : connection.protocol}`, `HOST=${address}`, `PORT=${connection.port}`,
      `USERNAME_B64=${b64(connection.username)}`, `PASSWORD_B64=${b64(relay ? '' : this.sessions.passwordOf(workspace))}`,
      `DOMAIN_B64=${b64(connection.domain)}`,
      ...(relay ? [`RELAY_SECRET_B64=${b64(this.sessions.relaySecretOf(workspace))}`, `RELAY_PORT=${RELAY_CONTAINER_PORT}`] : []),
    ];
    const pack = tar.pack();
    const mtime = new Date();
    pack.entry({ name: BRIDGE_CONNECTION_DIR, type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime });
    pack.entry({ name: `${BRIDGE_CONNECTION_DIR}/connection`, type: 'file', mode: 0o400, uid: BRIDGE_UID, gid: BRIDGE_UID, mtime }, `${lines.join('\n')}\n`);
    pack.finalize();
    await host.putArchive(containerId, BRIDGE_CONNECTION_PARENT, Readable.from(pack), CONNECT_TIMEOUT_MS);
  }

  /**
   * Waits (bounded) until the bridge's client or the relay reached the server: `connected` returns; `failed …`
   * is the workspace's failure, in the bridge's words; no answer in time fails with what it last said.
   */
  async waitUntilConnected(host: DockerHost, containerId: string, connection: WorkspaceServerConnection, signal?: AbortSignal): Promise<void> {
    const where = `${connection.protocol.toUpperCase()} server ${connection.host}:${connection.port}`;
    const deadline = performance.now() + BRIDGE_CONNECTED_TIMEOUT_MS;
    let last = '';
    for (let delay = STATUS_POLL_FIRST_MS; performance.now() < deadline; delay = Math.min(STATUS_POLL_MAX_MS, Math.round(delay * 1.5))) {
      signal?.throwIfAborted();
      const read = await host.exec(containerId, { cmd: `cat ${BRIDGE_STATUS_FILE} 2>/dev/null || true`, timeoutMs: 10_000 });
      last = read.stdout.trim().split('\n')[0] ?? '';
      if (last === 'connected') return;
      if (last.startsWith('failed')) {
        const said = last.slice('failed'.length).trim();
        this.logger.warn(`${where}: the bridge says: ${said}`);
        throw new PermanentFailure(bridgeFailureMessage(said, connection));
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    throw new PermanentFailure(`The ${where} did not accept the connection within ${BRIDGE_CONNECTED_TIMEOUT_MS / 1000} s${last ? ` (last state: ${last})` : ''}`);
  }
}
