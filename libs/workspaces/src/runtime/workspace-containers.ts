import { Injectable } from '@nestjs/common';
import { ContainerNotFoundError, ContainerState, DockerHost, ensureWorkspaceNetwork, networkExists, WORKSPACE_NETWORK, WorkspaceContainerSpec } from '@ws/agent';
import { PermanentFailure } from '@ws/queue';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';
import type { Workspace } from '../workspace.entity';
import type { ProvisionTarget } from './provision-strategy';

const RFB_TIMEOUT_MS = 60_000;

/**
 * The steps every workspace container goes through, whatever runs in it (a desktop, a bridge, a relay): each safe
 * to repeat (the name comes from the workspace id; a running container of ours is adopted, not made again).
 */
@Injectable()
export class WorkspaceContainers {
  constructor(private readonly lifecycle: WorkspaceLifecycle) {}

  /**
   * The workspace's container, running: the one an earlier run started, else created, handed to `prepare` before
   * it starts (a bridge's connection file, a persistent profile), and started.
   */
  async start(workspace: Workspace, target: ProvisionTarget, spec: WorkspaceContainerSpec, prepare: (containerId: string) => Promise<void>, signal?: AbortSignal): Promise<ContainerState> {
    const { host } = target;
    // The look for a container of an earlier run and the network's check are independent reads, made at once: a
    // cold start waits for each Docker round trip made before `docker start`.
    const [running] = await Promise.all([runningContainerOf(host, spec.name, spec.labels, spec.ports), this.checkNetwork(target, spec)]);
    if (running) return running;
    // A progress write goes beside the Docker call it announces, not before it: the start is what a person waits
    // for. Both settle before the next step; a container started whose id the row lacks is still found by its
    // name and labels (the next attempt adopts it above; the reconciler removes it if the workspace is gone).
    const [{ containerId }] = await Promise.all([host.createWorkspaceContainer(spec), this.lifecycle.progress(workspace.id, 20, 'Creating the container')]);
    await prepare(containerId);
    signal?.throwIfAborted();
    await Promise.all([this.lifecycle.progress(workspace.id, 40, 'Starting the container', { containerId }), host.start(containerId)]);
    return host.inspect(containerId, spec.ports);
  }

  /** The workspace network exists: ours is made when missing (isolated bridge, see docs/decisions.md); an operator's must exist. */
  private async checkNetwork({ host, server }: ProvisionTarget, spec: WorkspaceContainerSpec): Promise<void> {
    if (spec.network === WORKSPACE_NETWORK.name) await ensureWorkspaceNetwork(host);
    else if (spec.network && !(await networkExists(host, spec.network))) {
      throw new PermanentFailure(`The Docker network ${spec.network} does not exist on the server ${server.hostname}; create it there (docker network create) or change the image's network_name`);
    }
  }

  /** Until the container's VNC server answers RFB (bounded). */
  async waitForDesktop(workspace: Workspace, target: ProvisionTarget, state: ContainerState, spec: WorkspaceContainerSpec, signal?: AbortSignal): Promise<void> {
    const vncPort = state.hostPorts.vnc;
    if (!vncPort) throw new PermanentFailure(`The image ${spec.image} publishes no vnc port`);
    await Promise.all([
      this.lifecycle.progress(workspace.id, 60, 'Waiting for the desktop', { containerId: state.id }),
      target.host.waitForRfb(target.server.publishHost, vncPort, { timeoutMs: RFB_TIMEOUT_MS, signal }),
    ]);
  }

  /** The workspace `running` in this container; false (and the container removed) when it was destroyed while starting. */
  async markRunning(workspace: Workspace, target: ProvisionTarget, state: ContainerState, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    const done = await this.lifecycle.running(workspace.id, { containerId: state.id, containerIp: state.ip, hostPorts: state.hostPorts });
    if (!done) await target.host.remove(state.id); // destroyed while starting: leave nothing behind
    return done;
  }
}

/** The workspace's container when it exists, is ours (labels) and runs; else null (create and start it). */
async function runningContainerOf(host: DockerHost, name: string, labels: Record<string, string>, ports: Record<string, string>): Promise<ContainerState | null> {
  try {
    const state = await host.inspect(name, ports);
    const ours = Object.entries(labels).every(([k, v]) => state.labels[k] === v);
    return ours && state.running ? state : null;
  } catch (err) {
    if (err instanceof ContainerNotFoundError) return null;
    throw err;
  }
}
