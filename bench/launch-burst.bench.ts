/**
 * Issue 24 benchmark: a burst of BENCH_BURST (8) launches at once, request_workspace → every one `running` as a
 * polling integrator sees it, against the same number of bare `docker run`s at once until each VNC port answers,
 * in alternating rounds of one run. Placement, the seat and the outbox are the launches' shared points.
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { waitForRfb } from '@ws/agent';
import { desktopImage, post, registerLocalDesktop, startBenchApi, until } from './harness';
import { median } from './stats';

const BURST = Number(process.env.BENCH_BURST ?? 8);
const ROUNDS = Number(process.env.BENCH_BURST_ROUNDS ?? 3);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
const CORES = 1;
const MEMORY_MB = 512;
const run = promisify(execFile);

async function docker(...args: string[]): Promise<string> {
  return (await run('docker', args, { encoding: 'utf8' })).stdout.trim();
}

async function bareBurst(image: string): Promise<number> {
  const start = performance.now();
  const ids: string[] = [];
  try {
    await Promise.all(Array.from({ length: BURST }, async () => {
      const id = await docker('run', '-d', '--rm', '--cpus', String(CORES), '--memory', `${MEMORY_MB}m`, '-p', '127.0.0.1::5900', image);
      ids.push(id);
      const port = Number((await docker('port', id, '5900/tcp')).split('\n')[0].split(':').pop());
      await waitForRfb('127.0.0.1', port, { timeoutMs: 120_000 });
    }));
    return performance.now() - start;
  } finally {
    if (ids.length > 0) await docker('rm', '-f', ...ids);
  }
}

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi({ worker: true });
  const { base } = bench;
  try {
    const { image: img, auth } = await registerLocalDesktop(bench.api, { name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2 });
    const users = await Promise.all(Array.from({ length: BURST }, async (_, i) => (await post(base, 'create_user', { ...auth, target_user: { username: `burst${i}` } })).user as { user_id: string }));
    const launchBurst = async (): Promise<number> => {
      const start = performance.now();
      const ids = await Promise.all(users.map(async (user) => {
        const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id });
        const workspaceId = requested.workspace_id as string;
        if (!workspaceId) throw new Error(`request_workspace: ${JSON.stringify(requested)}`);
        for (let i = 0; i < 120_000 / POLL_MS; i++) {
          const status = await post(base, 'get_workspace_status', { ...auth, user_id: user.user_id, workspace_id: workspaceId, skip_agent_check: true });
          if ((status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running') return { user, workspaceId };
          if (status.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(status)}`);
          await new Promise((r) => setTimeout(r, POLL_MS));
        }
        throw new Error(`workspace ${workspaceId} not running within 120 s`);
      }));
      const elapsed = performance.now() - start;
      await Promise.all(ids.map(({ user, workspaceId }) => post(base, 'destroy_workspace', { ...auth, user_id: user.user_id, workspace_id: workspaceId })));
      // The next burst starts on an empty host.
      await until('the burst removed', async () => ((await docker('ps', '-q', '--filter', `label=workspace-server.deployment-id=${bench.settings.DEPLOYMENT_ID}`)) === '' ? true : undefined), 120_000);
      return elapsed;
    };
    const ours: number[] = [];
    const bare: number[] = [];
    await bareBurst(image); // warm the page cache for both sides
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2) {
        bare.push(await bareBurst(image));
        ours.push(await launchBurst());
      } else {
        ours.push(await launchBurst());
        bare.push(await bareBurst(image));
      }
    }
    console.log(`\nburst of ${BURST} launches (${image}, ${CORES} core, ${MEMORY_MB} MiB each; ${ROUNDS} rounds, median)`);
    console.log(`  request_workspace ×${BURST} → all running ${(median(ours) / 1000).toFixed(2)} s   bare docker run ×${BURST} → all VNC ${(median(bare) / 1000).toFixed(2)} s   ratio ${(median(ours) / median(bare)).toFixed(2)}`);
  } finally {
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
