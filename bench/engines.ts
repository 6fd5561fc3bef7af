/**
 * Docker engines for the launch benches (issue 24): this machine's engine and a second dockerd on it
 * (test/e2e/second-engine.ts: mutual TLS on a loopback port), each reached by the docker CLI for the bare baseline
 * and registered as a server for the service; bare `docker run` bursts spread over them; and a bounded wait until
 * a deployment has no container left on any of them.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { waitForRfb, WORKSPACE_NETWORK } from '@ws/agent';
import { SecondEngine } from '../test/e2e/second-engine';
import { BenchAuth, destroyAll, launchAll, placementSplit, until } from './harness';
import { LifecycleWebhook } from './lifecycle-webhook';
import { median } from './stats';

const run = promisify(execFile);

/** A Docker engine as the bench's docker CLI reaches it. */
export interface BenchEngine {
  /** Its server's hostname in the service. */
  hostname: string;
  /** What goes before the docker command (`-H … --tlsverify …` for the second engine). */
  cliArgs: string[];
}

export const LOCAL_ENGINE: BenchEngine = { hostname: 'local', cliArgs: [] };

/**
 * Capacity both engines are registered with: the same, so placement (least allocated first) spreads a burst evenly,
 * and large enough that capacity never refuses a launch (both engines really share this machine's cores).
 */
export const BENCH_SERVER_CAPACITY = { cores: 64, memory: 256 * 1024 ** 3 };

export async function docker(engine: BenchEngine, ...args: string[]): Promise<string> {
  return (await run('docker', [...engine.cliArgs, ...args], { encoding: 'utf8', timeout: 180_000 })).stdout.trim();
}

export function secondEngineCli(engine: SecondEngine, hostname = 'second'): BenchEngine {
  return { hostname, cliArgs: ['-H', engine.endpoint, '--tlsverify', '--tlscacert', engine.tls.ca, '--tlscert', engine.tls.cert, '--tlskey', engine.tls.key] };
}

/**
 * Registers a started second engine as server `second` (default zone, mutual TLS, BENCH_SERVER_CAPACITY) and copies
 * `image` onto it through the service (ImageDistribution: docker save → docker load through the API, as
 * `image distribute` does). Answers the engine as the CLI reaches it and how long the copy took.
 */
export async function registerSecondEngine(app: INestApplicationContext, engine: SecondEngine, image: string): Promise<{ engine: BenchEngine; copyMs: number }> {
  const [{ ZonesService }, { ImageDistribution, ServersService }] = await Promise.all([import('@ws/zones'), import('@ws/servers')]);
  const zone = await app.get(ZonesService).ensure('default');
  const cli = secondEngineCli(engine);
  await app.get(ServersService).upsert({
    hostname: cli.hostname, dockerEndpoint: engine.endpoint, zone, publishHost: '127.0.0.1', ...BENCH_SERVER_CAPACITY,
    tlsCaPath: engine.tls.ca, tlsCertPath: engine.tls.cert, tlsKeyPath: engine.tls.key,
  });
  const start = performance.now();
  const outcome = await app.get(ImageDistribution).distribute(image, [cli.hostname]);
  if (!outcome.copied.includes(cli.hostname) && !outcome.present.includes(cli.hostname)) throw new Error(`image distribute did not put ${image} on ${cli.hostname}: ${JSON.stringify(outcome)}`);
  return { engine: cli, copyMs: performance.now() - start };
}

/** The bare container's size, the same as the image registered for the product's launches. */
export interface BareResources {
  cores: number;
  memoryMb: number;
}

/**
 * `count` bare `docker run`s of `image` at once, spread round-robin over `engines`, until each one's VNC port answers
 * an RFB greeting; answers the time for all, and removes them whatever happened. On Docker's default bridge unless
 * `network` names another (the workspace network: a user-defined bridge, whose embedded DNS Docker sets up at each
 * start, docs/decisions/workspaces.md).
 */
export async function bareBurst(image: string, engines: BenchEngine[], count: number, resources: BareResources, network?: string): Promise<number> {
  const start = performance.now();
  const started: Array<{ engine: BenchEngine; id: string }> = [];
  try {
    await Promise.all(Array.from({ length: count }, async (_, i) => {
      const engine = engines[i % engines.length];
      const id = await docker(engine, 'run', '-d', '--rm', ...(network ? ['--network', network] : []), '--cpus', String(resources.cores), '--memory', `${resources.memoryMb}m`, '-p', '127.0.0.1::5900', image);
      started.push({ engine, id });
      const port = Number((await docker(engine, 'port', id, '5900/tcp')).split('\n')[0].split(':').pop());
      // Bounded but generous: on a busy 2-core machine 16 desktops starting at once take minutes.
      await waitForRfb('127.0.0.1', port, { timeoutMs: 300_000 });
    }));
    return performance.now() - start;
  } finally {
    await Promise.all(engines.map(async (engine) => {
      const ids = started.filter((s) => s.engine === engine).map((s) => s.id);
      if (ids.length > 0) await docker(engine, 'rm', '-f', ...ids);
    }));
  }
}

/**
 * The deployment's network holders (NETWORK_POOL_SIZE per engine) as a bench waits on them: a burst starts once each
 * engine's pool is full again, so neither side runs beside the pool's refill.
 */
export interface NetworkPoolWatch {
  size: number;
  rows: () => Promise<Array<{ container_id: string; workspace_id: string | null }>>;
}

/** The network holders of the deployment `app` runs (NETWORK_POOL_SIZE `size` per engine), for untilNoContainers. */
export function networkPoolOf(app: INestApplicationContext, size: number): NetworkPoolWatch {
  return { size, rows: () => app.get(DataSource).query('SELECT container_id, workspace_id FROM network_holders') };
}

/**
 * Until no engine holds a container of the deployment but its free network holders, all recorded and as many as
 * `pool` keeps (a burst removed, the pool refilled; the next one starts on quiet hosts).
 */
export function untilNoContainers(deploymentId: string, engines: BenchEngine[], timeoutMs = 180_000, pool?: NetworkPoolWatch): Promise<true> {
  return until(`no container of ${deploymentId} left on ${engines.map((e) => e.hostname).join(', ')}${pool ? ' but a full network pool' : ''}`, async () => {
    const rows = pool ? await pool.rows() : [];
    const holders = new Set(rows.map((r) => r.container_id.slice(0, 12)));
    const left = await Promise.all(engines.map((engine) => docker(engine, 'ps', '-aq', '--filter', `label=workspace-server.deployment-id=${deploymentId}`)));
    const others = left.flatMap((ids) => ids.split('\n').filter(Boolean)).filter((id) => !holders.has(id.slice(0, 12)));
    const poolFull = !pool || (rows.length === pool.size * engines.length && rows.every((r) => r.workspace_id === null));
    return others.length === 0 && poolFull ? true : undefined;
  }, timeoutMs);
}

/** BENCH_FOLLOW: how a burst's launches are followed until running (bench/lifecycle-webhook.ts says why webhooks). */
export type BurstFollow = 'webhook' | 'poll';
export const BURST_FOLLOW: BurstFollow = process.env.BENCH_FOLLOW === 'poll' ? 'poll' : 'webhook';

export interface BurstComparison {
  /** Milliseconds per round: the product's burst (request → all running) and the bare one (run → all VNC). */
  ours: number[];
  bare: number[];
  /** The bare burst on the workspace network instead of the default bridge: what Docker's part costs there. */
  bareOnWorkspaceNetwork: number[];
  /** Where placement put each round's workspaces (placementSplit). */
  splits: string[];
}

/**
 * The launch-burst comparison: two bare containers per engine to warm the page cache, then `rounds` alternating rounds of the
 * product's burst (one launch per user at once, polled until running, destroyed and removed before the next) and
 * as many bare `docker run`s spread over the same engines, so background load on the shared machine hits both alike.
 */
export async function compareBursts(options: {
  base: string; auth: BenchAuth; userIds: string[]; imageId: string; image: string; deploymentId: string;
  engines: BenchEngine[]; resources: BareResources; rounds: number; pollMs: number;
  /** How the product's launches are followed until running: their webhooks (the default), or polling every pollMs. */
  follow: BurstFollow;
  /** The deployment's network holders, when it keeps them. */
  pool?: NetworkPoolWatch;
}): Promise<BurstComparison> {
  const { base, auth, userIds, engines } = options;
  const result: BurstComparison = { ours: [], bare: [], bareOnWorkspaceNetwork: [], splits: [] };
  const bare = async () => {
    result.bare.push(await bareBurst(options.image, engines, userIds.length, options.resources));
    result.bareOnWorkspaceNetwork.push(await bareBurst(options.image, engines, userIds.length, options.resources, WORKSPACE_NETWORK.name));
  };
  const watcher = options.follow === 'webhook' ? await LifecycleWebhook.start(base, auth) : undefined;
  const ours = async () => {
    const { elapsedMs, launched } = await launchAll(base, auth, userIds, options.imageId, options.pollMs, 600_000, watcher);
    result.splits.push(placementSplit(launched));
    await destroyAll(base, auth, launched);
    await untilNoContainers(options.deploymentId, engines, undefined, options.pool);
    result.ours.push(elapsedMs);
  };
  try {
    await bareBurst(options.image, engines, 2 * engines.length, options.resources); // warm each engine's page cache
    await untilNoContainers(options.deploymentId, engines, undefined, options.pool);
    for (let round = 0; round < options.rounds; round++) {
      if (round % 2) {
        await bare();
        await ours();
      } else {
        await ours();
        await bare();
      }
    }
  } finally {
    await watcher?.close();
  }
  return result;
}

/** The comparison's line: medians and their ratio. */
export function burstLine(count: number, comparison: BurstComparison): string {
  const ours = median(comparison.ours);
  const bare = median(comparison.bare);
  const followed = BURST_FOLLOW === 'webhook' ? 'by webhook' : 'polled';
  const onNetwork = median(comparison.bareOnWorkspaceNetwork);
  return `  request_workspace ×${count} → all running (${followed}) ${(ours / 1000).toFixed(2)} s   bare docker run ×${count} → all VNC ${(bare / 1000).toFixed(2)} s   ratio ${(ours / bare).toFixed(2)}\n`
    + `  the same bare runs on the workspace network (${WORKSPACE_NETWORK.name}) ${(onNetwork / 1000).toFixed(2)} s: ×${(onNetwork / bare).toFixed(2)} of the default bridge's; the launches ×${(ours / onNetwork).toFixed(2)} of these`;
}
