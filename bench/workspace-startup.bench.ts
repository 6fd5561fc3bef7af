/**
 * Issue 3 benchmark: time from request_workspace until a polling integrator sees `running`, against a bare
 * `docker run` of the same image with the same limits until its VNC port answers, interleaved in one run. A
 * request not `running` within POLL_LIMIT_MS is counted as a timeout, apart from the samples; each baseline run
 * starts once the previous workspace's destroy has finished (its containers gone), so the two never overlap.
 * Each round also launches once more followed by its `workspace.running` webhook instead of polling (an
 * integrator with webhooks learns of `running` when the service records it, not at its next poll): issue 25's
 * target, request → running ≤ 1.05× the bare run at p50 and p95, is printed for both ways of following. The bare
 * run also runs on the workspace network (a user-defined bridge, whose embedded DNS Docker sets up at each start;
 * the default bridge has none), so the isolation's own cost in Docker shows apart from the service's. The deployment
 * keeps BENCH_NETWORK_POOL network holders (default 2; 0: none), as an operator who sets NETWORK_POOL_SIZE does: each
 * launch's container joins a namespace made in advance, and every measurement starts once the pool is full again.
 */
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { waitForRfb, WORKSPACE_NETWORK } from '@ws/agent';
import { LOCAL_ENGINE, networkPoolOf, untilNoContainers } from './engines';
import { desktopImage, post, registerLocalDesktop, startBenchApi } from './harness';
import { LifecycleWebhook } from './lifecycle-webhook';
import { median, percentile, row } from './stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
const POLL_LIMIT_MS = 60_000;
const NETWORK_POOL = Number(process.env.BENCH_NETWORK_POOL ?? 2);
const CORES = 1;
const MEMORY_MB = 512;
/** Issue 25: request → running ≤ 1.05× a bare docker run → VNC, at p50 and at p95. */
const TARGET_RATIO = 1.05;

function docker(...args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8' }).trim();
}

/** A bare `docker run` of `image` until its VNC port answers: on Docker's default bridge unless `network` names another. */
async function bareDockerRun(image: string, network?: string): Promise<number> {
  const start = performance.now();
  const id = docker('run', '-d', '--rm', ...(network ? ['--network', network] : []), '--cpus', String(CORES), '--memory', `${MEMORY_MB}m`, '-p', '127.0.0.1::5900', image);
  try {
    const port = Number(docker('port', id, '5900/tcp').split('\n')[0].split(':').pop());
    await waitForRfb('127.0.0.1', port, { timeoutMs: 60_000 });
    return performance.now() - start;
  } finally {
    docker('rm', '-f', id);
  }
}

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi({ worker: true, settings: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: true, NETWORK_POOL_SIZE: NETWORK_POOL, NETWORK_POOL_IMAGE: image } });
  const { base } = bench;
  try {
    const { image: img, auth } = await registerLocalDesktop(bench.api, { name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2 });
    const user = (await post(base, 'create_user', { ...auth, target_user: { username: 'bench' } })).user as { user_id: string };

    const watcher = await LifecycleWebhook.start(base, auth);
    const ours: number[] = [];
    const byWebhook: number[] = [];
    const bare: number[] = [];
    const bareOnWorkspaceNetwork: number[] = [];
    let timeouts = 0;
    // Before each measurement: no container of the deployment but a full pool of free holders (none being made).
    const quiet = () => untilNoContainers(bench.settings.DEPLOYMENT_ID, [LOCAL_ENGINE], 60_000, networkPoolOf(bench.api, NETWORK_POOL));
    const destroy = async (workspaceId: string) => {
      await post(base, 'destroy_workspace', { ...auth, user_id: user.user_id, workspace_id: workspaceId });
      await quiet();
    };
    /** request_workspace until its workspace.running webhook arrives; null when no event came in time. */
    const followedByWebhook = async (): Promise<number | null> => {
      const start = performance.now();
      const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id });
      const workspaceId = requested.workspace_id as string;
      try {
        const { outcome, message } = await watcher.outcome(workspaceId, Date.now() + POLL_LIMIT_MS).catch(() => ({ outcome: null, message: null }));
        if (outcome === 'failed') throw new Error(`workspace failed: ${message}`);
        return outcome === 'running' ? performance.now() - start : null;
      } finally {
        await destroy(workspaceId);
      }
    };
    await bareDockerRun(image); // warm the page cache for both sides
    await quiet();
    for (let round = 0; round < ROUNDS; round++) {
      const followed = await followedByWebhook();
      if (followed === null) timeouts++;
      else byWebhook.push(followed);
      const start = performance.now();
      const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id });
      const workspaceId = requested.workspace_id as string;
      let running = false;
      while (!running && performance.now() - start < POLL_LIMIT_MS) {
        const status = await post(base, 'get_workspace_status', { ...auth, user_id: user.user_id, workspace_id: workspaceId, skip_agent_check: true });
        running = (status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running';
        if (status.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(status)}`);
        if (!running) await new Promise((r) => setTimeout(r, POLL_MS));
      }
      if (running) ours.push(performance.now() - start);
      else timeouts++;
      await destroy(workspaceId);
      // The two baselines in turn, so neither always follows a destroy's tail.
      const onBridge = () => bareDockerRun(image).then((ms) => bare.push(ms));
      const onWorkspaceNetwork = () => bareDockerRun(image, WORKSPACE_NETWORK.name).then((ms) => bareOnWorkspaceNetwork.push(ms));
      for (const run of round % 2 ? [onWorkspaceNetwork, onBridge] : [onBridge, onWorkspaceNetwork]) await run();
    }
    await watcher.close();
    console.log(`\nworkspace startup (${image}, ${CORES} core, ${MEMORY_MB} MiB, integrator polls every ${POLL_MS} ms, ${NETWORK_POOL} network holders)`);
    console.log(row('request_workspace → running (polling)', ours));
    console.log(row('request_workspace → running (webhook)', byWebhook));
    console.log(row('bare docker run → VNC answers (baseline)', bare));
    console.log(row('bare docker run on the workspace network → VNC', bareOnWorkspaceNetwork));
    console.log(`timeouts (not running within ${POLL_LIMIT_MS / 1000} s, not among the samples): ${timeouts} of ${2 * ROUNDS}`);
    for (const [how, values] of [['polling', ours], ['webhook', byWebhook]] as const) {
      if (!values.length) continue;
      const p50 = median(values) / median(bare);
      const p95 = percentile(values, 95) / percentile(bare, 95);
      console.log(`ratio (${how}) at p50 ${p50.toFixed(2)}, at p95 ${p95.toFixed(2)}  (target ≤ ${TARGET_RATIO} at both: ${p50 <= TARGET_RATIO && p95 <= TARGET_RATIO ? 'met' : 'NOT met'})`);
      const onNetwork = [median(values) / median(bareOnWorkspaceNetwork), percentile(values, 95) / percentile(bareOnWorkspaceNetwork, 95)];
      console.log(`  against the bare run on the workspace network: at p50 ${onNetwork[0].toFixed(2)}, at p95 ${onNetwork[1].toFixed(2)} (the service's own share)`);
    }
  } finally {
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
