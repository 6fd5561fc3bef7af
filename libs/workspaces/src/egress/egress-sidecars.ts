import { Readable } from 'node:stream';
import { Injectable } from '@nestjs/common';
import * as tar from 'tar-stream';
import { ContainerNotFoundError, ContainerState, DockerHost, egressSidecarNameFor, ensureWorkspaceNetwork, LABELS, networkExists, WORKSPACE_NETWORK, WorkspaceContainerSpec } from '@ws/agent';
import { AppConfig } from '@ws/common';
import type { EgressSidecarFiles } from '@ws/egress';
import { PermanentFailure } from '@ws/queue';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import type { Workspace } from '../workspace.entity';

const TUNNEL_TIMEOUT_MS = 20_000;
const WRITE_TIMEOUT_MS = 15_000;
const SIDECAR_MEMORY = 128 * 1024 ** 2;
/**
 * Docker's health check of a sidecar: /run/egress/status (written every second by the entrypoint) says `up`. Two
 * failed checks 5 s apart make it unhealthy; the launch's own wait covers the start (start period).
 */
const SIDECAR_HEALTHCHECK = { cmd: ['grep', '-qx', 'up', '/run/egress/status'], intervalMs: 5_000, timeoutMs: 3_000, retries: 2, startPeriodMs: 30_000 };
/** Why a tunnel that never came up probably did not, per provider type (a refusal the client can tell fails earlier). */
const TIMEOUT_REASON: Record<string, string> = {
  key_pair_tunnel: 'no handshake: the endpoint is unreachable or refused the key',
  username_password_vpn: 'the endpoint is unreachable or did not complete the TLS handshake',
  mesh_network: 'no handshake with the exit node: the endpoint is unreachable or refused the node\'s certificate',
  custom: 'the command did not bring its interface up',
};

/**
 * A workspace's egress sidecar (docs/decisions/egress.md, "Egress for real (issue 21)"): a container of EGRESS_IMAGE
 * on the workspace's network, labelled like the workspace's container (the reconciler and destroy remove it with the
 * workspace), root with NET_ADMIN and /dev/net/tun (the workspace container keeps neither), holding the tunnel's
 * files (written through the archive API before it starts: never its environment or labels) and the workspace's
 * published ports. The workspace container joins its network namespace; it is `running` only once the sidecar says
 * the tunnel is up (a WireGuard handshake, OpenVPN's route-up, a custom command's interface up).
 */
@Injectable()
export class EgressSidecars {
  constructor(
    private readonly config: AppConfig,
    private readonly lifecycle: WorkspaceLifecycle,
  ) {}

  /** The running sidecar with the tunnel up (an earlier attempt's, if it runs; else made again). */
  async start(workspace: Workspace, host: DockerHost, workspaceSpec: WorkspaceContainerSpec, sidecar: EgressSidecarFiles & { gatewayName: string }, signal?: AbortSignal): Promise<ContainerState> {
    if (!this.config.EGRESS_IMAGE) throw new PermanentFailure(`EGRESS_IMAGE is not set: the egress gateway ${sidecar.gatewayName} needs a sidecar container`);
    const spec = this.specOf(workspace, workspaceSpec);
    const existing = await host.inspect(spec.name, spec.ports).catch((err) => {
      if (err instanceof ContainerNotFoundError) return null;
      throw err;
    });
    if (existing?.running && existing.labels[LABELS.role] === 'egress') {
      await this.waitForTunnel(host, existing.id, sidecar, signal);
      return existing;
    }
    if (existing) await host.remove(existing.id);
    await this.lifecycle.progress(workspace.id, 15, `Connecting to the egress gateway ${sidecar.gatewayName}`);
    if (spec.network === WORKSPACE_NETWORK.name) await ensureWorkspaceNetwork(host);
    else if (spec.network && !(await networkExists(host, spec.network))) throw new PermanentFailure(`The Docker network ${spec.network} does not exist on this server`);
    const { containerId } = await host.createWorkspaceContainer(spec);
    await host.putArchive(containerId, '/etc', Readable.from(packFiles(sidecar)), WRITE_TIMEOUT_MS);
    signal?.throwIfAborted();
    await host.start(containerId);
    await this.waitForTunnel(host, containerId, sidecar, signal);
    return host.inspect(containerId, spec.ports);
  }

  private specOf(workspace: Workspace, ws: WorkspaceContainerSpec): WorkspaceContainerSpec {
    return {
      name: egressSidecarNameFor(workspace.id), image: this.config.EGRESS_IMAGE, cores: 0.5, memoryBytes: SIDECAR_MEMORY, env: {},
      labels: { ...ws.labels, [LABELS.role]: 'egress' }, ports: ws.ports, publishHost: ws.publishHost, network: ws.network,
      user: '0', capAdd: ['NET_ADMIN'], noNewPrivileges: true, init: true, pidsLimit: 128,
      devices: [{ pathOnHost: '/dev/net/tun', pathInContainer: '/dev/net/tun', cgroupPermissions: 'rwm' }],
      // Healthy while the sidecar's status says `up`: EgressTunnelHealth reads it with an inspect (no exec of ours).
      healthcheck: SIDECAR_HEALTHCHECK,
      ...(ws.hostname ? { hostname: ws.hostname } : {}), ...(ws.extraHosts?.length ? { extraHosts: ws.extraHosts } : {}),
    };
  }

  /** Until /run/egress/status says up; a failure the sidecar reports (with its reason) or the time limit fails the launch. */
  private async waitForTunnel(host: DockerHost, containerId: string, sidecar: EgressSidecarFiles & { gatewayName: string }, signal?: AbortSignal): Promise<void> {
    const { gatewayName } = sidecar;
    const type = sidecar.files.type?.content.trim() ?? '';
    const deadline = Date.now() + TUNNEL_TIMEOUT_MS;
    let status = 'starting';
    while (Date.now() < deadline) {
      signal?.throwIfAborted();
      const state = await host.inspect(containerId);
      if (!state.running) throw new PermanentFailure(`The egress sidecar for the gateway ${gatewayName} exited (code ${state.exitCode})`);
      const read = await host.exec(containerId, { cmd: 'cat /run/egress/status 2>/dev/null', user: 'root', timeoutMs: 5_000 });
      status = read.stdout.trim() || 'starting';
      if (status === 'up') return;
      if (status.startsWith('failed: ')) throw new PermanentFailure(`The tunnel to the egress gateway ${gatewayName} could not start: ${status.slice(8)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new PermanentFailure(
      `The tunnel to the egress gateway ${gatewayName} did not come up within ${TUNNEL_TIMEOUT_MS / 1000} s (${TIMEOUT_REASON[type] ?? 'the endpoint is unreachable or did not answer'})`,
    );
  }
}

function packFiles(sidecar: EgressSidecarFiles): tar.Pack {
  const pack = tar.pack();
  const mtime = new Date();
  pack.entry({ name: 'egress', type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime });
  for (const [name, file] of Object.entries(sidecar.files)) pack.entry({ name: `egress/${name}`, type: 'file', mode: file.mode, uid: 0, gid: 0, mtime }, file.content);
  pack.finalize();
  return pack;
}
