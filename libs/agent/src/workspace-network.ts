import type Docker from 'dockerode';
import type { DockerHost } from './docker-host';
import { AgentError, classifyDockerError, daemonMessageOf, DockerDaemonError, DockerTimeoutError, httpStatusOf } from './errors';

/**
 * The bridge network every workspace container joins (unless its image is restricted to a network of its own).
 * One per Docker host, shared by all deployments on it: inter-container traffic is off on it, and the host
 * firewall (scripts/workspace-firewall.sh, matching the bridge's interface name) refuses connections from it
 * to the host, to other Docker networks and to private addresses. Published ports stay reachable from the host.
 */
export const WORKSPACE_NETWORK = {
  name: 'workspace-server-isolated',
  /** Linux interface name. Docker refuses a second network with the same bridge name, so two concurrent creators cannot both succeed. */
  bridge: 'ws-isolated',
  label: 'workspace-server.network',
  labelValue: 'workspace-isolation',
  /**
   * Engine label (dockerd --label workspace-server.isolated-bridge=<name>) naming the bridge on an engine that
   * shares its network namespace with another one (two engines on one machine); the firewall gets the same name
   * (WS_ISOLATED_BRIDGE). Without it: `bridge`.
   */
  engineLabel: 'workspace-server.isolated-bridge',
} as const;

const BRIDGE_NAME = /^[a-zA-Z0-9_.-]{1,15}$/;

/** The isolated bridge's interface name on an engine with these labels. */
export function isolatedBridgeOf(engineLabels: Record<string, string>): string {
  const named = engineLabels[WORKSPACE_NETWORK.engineLabel];
  return named && BRIDGE_NAME.test(named) ? named : WORKSPACE_NETWORK.bridge;
}

const BRIDGE_NAME_OPTION = 'com.docker.network.bridge.name';
const ICC_OPTION = 'com.docker.network.bridge.enable_icc';

export function workspaceNetworkCreateOptions(bridge: string = WORKSPACE_NETWORK.bridge): Docker.NetworkCreateOptions {
  return {
    Name: WORKSPACE_NETWORK.name,
    Driver: 'bridge',
    CheckDuplicate: true,
    Internal: false,
    EnableIPv6: false,
    Attachable: false,
    Options: { [BRIDGE_NAME_OPTION]: bridge, [ICC_OPTION]: 'false' },
    Labels: { [WORKSPACE_NETWORK.label]: WORKSPACE_NETWORK.labelValue },
  };
}

interface NetworkInfo {
  Id: string;
  Name: string;
  Driver?: string;
  Options?: Record<string, string> | null;
  Labels?: Record<string, string> | null;
}

/** Why a network of that name is not ours to use (a look-alike could join workspaces to an open bridge), or null. */
export function foreignNetworkReason(info: NetworkInfo, bridge: string = WORKSPACE_NETWORK.bridge): string | null {
  if (info.Driver !== 'bridge') return `its driver is ${info.Driver ?? 'unknown'}, not bridge`;
  if (info.Options?.[BRIDGE_NAME_OPTION] !== bridge) return `its bridge is not ${bridge}`;
  if (info.Options?.[ICC_OPTION] !== 'false') return 'inter-container traffic is enabled on it';
  if (info.Labels?.[WORKSPACE_NETWORK.label] !== WORKSPACE_NETWORK.labelValue) return `it lacks the label ${WORKSPACE_NETWORK.label}`;
  return null;
}

/** One Docker call bounded like DockerHost's own (the request is aborted at the bound); errors come out classified. */
async function bounded<T>(host: DockerHost, operation: string, fn: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new DockerTimeoutError(host.name, operation, host.requestTimeoutMs));
    }, host.requestTimeoutMs);
  });
  try {
    return await Promise.race([fn(controller.signal), timeout]);
  } catch (err) {
    if (err instanceof AgentError) throw err;
    throw classifyDockerError(err, { host: host.name, operation });
  } finally {
    clearTimeout(timer);
  }
}

async function inspectNetwork(host: DockerHost, name: string = WORKSPACE_NETWORK.name): Promise<NetworkInfo | null> {
  return bounded(host, `inspect network ${name}`, async (abortSignal) => {
    try {
      // Network.inspect would put an abort signal into the query string; dial directly.
      return await new Promise<NetworkInfo>((resolve, reject) => {
        host.docker.modem.dial(
          { path: `/networks/${encodeURIComponent(name)}?`, method: 'GET', abortSignal, statusCodes: { 200: true, 404: 'no such network', 500: 'server error' }, options: {} },
          (err: unknown, data: unknown) => (err ? reject(err) : resolve(data as NetworkInfo)),
        );
      });
    } catch (err) {
      if (httpStatusOf(err) === 404) return null;
      throw err;
    }
  });
}

function verified(host: DockerHost, info: NetworkInfo, bridge: string): string {
  const reason = foreignNetworkReason(info, bridge);
  if (reason) {
    throw new DockerDaemonError(host.name, `use network ${WORKSPACE_NETWORK.name}`, null, `a network of that name exists but ${reason}; remove it (docker network rm) so the agent can create the isolated one`, false);
  }
  return info.Id;
}

/** The engine's isolated bridge name, asked once per DockerHost (an engine's labels change only with a restart of it). */
const bridges = new WeakMap<DockerHost, string>();
async function bridgeOf(host: DockerHost): Promise<string> {
  const known = bridges.get(host);
  if (known) return known;
  const bridge = isolatedBridgeOf((await host.info()).labels ?? {});
  bridges.set(host, bridge);
  return bridge;
}

async function ensure(host: DockerHost): Promise<string> {
  const bridge = await bridgeOf(host);
  const existing = await inspectNetwork(host);
  if (existing) return verified(host, existing, bridge);
  try {
    const network = await bounded(host, `create network ${WORKSPACE_NETWORK.name}`, (abortSignal) => host.docker.createNetwork({ ...workspaceNetworkCreateOptions(bridge), abortSignal }));
    return network.id;
  } catch (err) {
    // Another worker created it first (name or bridge name taken): adopt theirs after checking it.
    const cause = err instanceof AgentError ? err.cause : err;
    if (!/already exists|conflicts with network|same bridge name/i.test(daemonMessageOf(cause))) throw err;
    const theirs = await inspectNetwork(host);
    if (!theirs) throw err;
    return verified(host, theirs, bridge);
  }
}

const inFlight = new WeakMap<DockerHost, Promise<string>>();

/**
 * Makes sure the workspace network exists on this host; answers its id. Idempotent, and checked on every
 * provision (one inspect) because `docker network prune` removes it whenever no workspace runs. Concurrent
 * callers in one process share one check.
 */
export function ensureWorkspaceNetwork(host: DockerHost): Promise<string> {
  const pending = inFlight.get(host);
  if (pending) return pending;
  const promise = ensure(host).finally(() => inFlight.delete(host));
  inFlight.set(host, promise);
  return promise;
}

/**
 * Whether an operator's network (an image's network_name, a cast visitor's choice) exists on this host. The agent
 * never creates those: their isolation is the operator's, so a missing one fails the provision instead.
 */
export async function networkExists(host: DockerHost, name: string): Promise<boolean> {
  return (await inspectNetwork(host, name)) !== null;
}
