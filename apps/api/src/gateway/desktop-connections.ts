import type { Socket } from 'node:net';
import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { authenticateToServer, ReadBufferPool } from '@ws/stream';
import { WorkspaceServerSessions } from '@ws/server-sessions';
import type { VncEndpoint, Workspace } from '@ws/workspaces';
import { openDesktopTcp } from './desktop-tcp';

/** How long a connection opened ahead waits for its websocket before it is closed. */
const WARM_TTL_MS = 15_000;
export const DESKTOP_HANDSHAKE_TIMEOUT_MS = 10_000;

interface Parked {
  /** host:port it was opened to: taken only for the same endpoint. */
  endpoint: string;
  socket: Promise<Socket>;
  timer: NodeJS.Timeout;
}

/**
 * The stream gateway's connections to workspaces' VNC servers, authenticated with the workspace's password (reads
 * land in the pooled buffers of `readBuffers`). Opened when a websocket is admitted, or ahead of it: when the
 * browser client's connect call finds the workspace running, its stream comes next, and the TCP connection and
 * VNC handshake (several round trips, and a VNC server that answers a new client only on its next loop) then run
 * while the page opens the websocket and the gateway admits it, instead of after. At most one per workspace, kept
 * WARM_TTL_MS; the websocket's admission decides, as always, whether the stream may be opened (a connection taken
 * here carries no right of its own). Per api process: a websocket that reaches another replica opens its own
 * connection, and this one is closed when its time is up.
 */
@Injectable()
export class DesktopConnections implements OnModuleDestroy {
  /** VNC reads land in reused buffers, returned when the chunk has gone out to the browser. */
  readonly readBuffers = new ReadBufferPool();
  private readonly parked = new Map<string, Parked>();

  constructor(private readonly serverSessions: WorkspaceServerSessions) {}

  /**
   * The authenticated connection for a websocket admitted to `workspaceId`'s stream: the one opened ahead for this
   * endpoint if there is one (waiting for its handshake if it still runs), else a new one. The caller owns it.
   */
  async open(workspaceId: string, endpoint: VncEndpoint): Promise<Socket> {
    const ahead = await this.take(workspaceId, endpoint.host, endpoint.port);
    if (ahead) return ahead;
    return this.connect(endpoint);
  }

  /** Opens a connection ahead for the running `workspace`, unless one is parked already; never fails (a failure just parks nothing). */
  warm(workspace: Workspace): void {
    if (workspace.status !== 'running' || this.parked.has(workspace.id)) return;
    let endpoint;
    try {
      endpoint = this.serverSessions.vncEndpointOf(workspace);
    } catch {
      return; // not streamable: the websocket's admission says why
    }
    if (!endpoint) return;
    const { host, port } = endpoint;
    const socket = this.connect(endpoint).then((opened) => {
      // Parked with no reader: a close or error only forgets it.
      opened.on('error', () => undefined);
      opened.once('close', () => this.forget(workspace.id, parked));
      return opened;
    });
    const parked: Parked = {
      endpoint: `${host}:${port}`,
      socket,
      timer: setTimeout(() => {
        if (this.forget(workspace.id, parked)) void socket.then((s) => s.destroy(), () => undefined);
      }, WARM_TTL_MS),
    };
    parked.timer.unref();
    socket.catch(() => this.forget(workspace.id, parked));
    this.parked.set(workspace.id, parked);
  }

  /** TCP and the VNC handshake up to ClientInit; the socket is destroyed when the handshake fails. */
  private async connect({ host, port, password }: VncEndpoint): Promise<Socket> {
    const socket = await openDesktopTcp(host, port, DESKTOP_HANDSHAKE_TIMEOUT_MS, this.readBuffers);
    try {
      await authenticateToServer(socket, password, DESKTOP_HANDSHAKE_TIMEOUT_MS);
    } catch (err) {
      socket.destroy();
      throw err;
    }
    return socket;
  }

  /**
   * The connection opened ahead for the workspace at `host`:`port`, authenticated and unused (waiting for it when its
   * handshake is still running), or null: none, it failed, or it closed meanwhile.
   */
  private async take(workspaceId: string, host: string, port: number): Promise<Socket | null> {
    const parked = this.parked.get(workspaceId);
    if (!parked) return null;
    this.forget(workspaceId, parked);
    const socket = await parked.socket.catch(() => null);
    if (!socket || socket.destroyed || socket.readableEnded || parked.endpoint !== `${host}:${port}`) {
      socket?.destroy();
      return null;
    }
    socket.removeAllListeners('close');
    socket.removeAllListeners('error');
    return socket;
  }

  onModuleDestroy(): void {
    for (const [id, parked] of [...this.parked]) {
      this.forget(id, parked);
      void parked.socket.then((s) => s.destroy(), () => undefined);
    }
  }

  private forget(workspaceId: string, parked: Parked): boolean {
    if (this.parked.get(workspaceId) !== parked) return false;
    clearTimeout(parked.timer);
    this.parked.delete(workspaceId);
    return true;
  }
}
