/**
 * Issue 24 benchmark: launches per minute with 1, 2 and 4 worker processes (BENCH_POOL_WORKERS) over two engines,
 * each as a ratio to the 1-worker figure of the same run. This machine's engine and a second dockerd on it
 * (test/e2e/second-engine.ts, mutual TLS) are registered as servers with the same capacity, the image copied to the
 * second through the service. Per configuration: that many compiled workers as processes of their own (default
 * WORKER_CONCURRENCY), a burst of BENCH_POOL_LAUNCHES (16) request_workspace for pre-created users, each polled
 * until `running`; then every workspace destroyed and its container gone from both engines and the workers
 * stopped, so the next configuration starts from a quiet state. BENCH_POOL_ROUNDS (2) rounds, the order of the
 * configurations reversed every other round; medians.
 */
import 'reflect-metadata';
import { resolve } from 'node:path';
import { SecondEngine } from '../test/e2e/second-engine';
import { WorkerProcess } from '../test/e2e/worker-processes';
import { bareBurst, BENCH_SERVER_CAPACITY, LOCAL_ENGINE, registerSecondEngine, untilNoContainers } from './engines';
import { cleanUpOnSignal, createUsers, desktopImage, destroyAll, launchAll, placementSplit, registerLocalDesktop, startBenchApi } from './harness';
import { median } from './stats';

const WORKER_COUNTS = (process.env.BENCH_POOL_WORKERS ?? '1,2,4').split(',').map(Number);
const LAUNCHES = Number(process.env.BENCH_POOL_LAUNCHES ?? 16);
const ROUNDS = Number(process.env.BENCH_POOL_ROUNDS ?? 2);
// 16 integrators polling every 50 ms would be ~320 requests/s on the same two cores as the launches.
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 100);
const CORES = 1;
const MEMORY_MB = 512;
/** The compiled worker (npm run bench builds dist/ and runs this file from dist/bench). */
const WORKER_JS = process.env.BENCH_WORKER_JS ?? resolve(__dirname, '../apps/worker/src/main.js');

async function main(): Promise<void> {
  const image = desktopImage();
  const workers: WorkerProcess[] = [];
  const stopWorkers = async () => {
    for (const worker of workers.splice(0)) await worker.kill('SIGTERM', 30_000).catch(() => worker.kill('SIGKILL', 10_000));
  };
  let engine: SecondEngine | undefined;
  // The api in this process; the workers are the pool under test.
  const bench = await startBenchApi();
  const { base } = bench;
  const cleanUp = async () => {
    try {
      await stopWorkers().catch((err: Error) => console.error(`stopping the workers: ${err.message}`));
      await bench.close();
    } finally {
      await engine?.stop();
    }
  };
  cleanUpOnSignal(cleanUp);
  try {
    engine = await SecondEngine.start({ tag: 'wpb' });
    const { image: img, auth } = await registerLocalDesktop(bench.api, { name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2 }, BENCH_SERVER_CAPACITY);
    const second = await registerSecondEngine(bench.api, engine, image);
    const engines = [LOCAL_ENGINE, second.engine];
    const userIds = await createUsers(base, auth, 'pool', LAUNCHES);
    await bareBurst(image, engines, 4, { cores: CORES, memoryMb: MEMORY_MB }); // warm both engines' page cache

    const perMinute = new Map<number, number[]>(WORKER_COUNTS.map((n) => [n, []]));
    const splits = new Map<number, string[]>(WORKER_COUNTS.map((n) => [n, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const count of round % 2 ? [...WORKER_COUNTS].reverse() : WORKER_COUNTS) {
        for (let i = 0; i < count; i++) workers.push(WorkerProcess.spawn(bench.settings, {}, WORKER_JS));
        await Promise.all(workers.map((w) => w.ready(90_000)));
        const { elapsedMs, launched } = await launchAll(base, auth, userIds, img.id, POLL_MS, 600_000);
        perMinute.get(count)!.push(LAUNCHES / (elapsedMs / 60_000));
        splits.get(count)!.push(placementSplit(launched));
        await destroyAll(base, auth, launched);
        await untilNoContainers(bench.settings.DEPLOYMENT_ID, engines);
        await stopWorkers();
      }
    }

    const baseline = median(perMinute.get(WORKER_COUNTS[0])!);
    console.log(`\nlaunches per minute by worker processes over two engines on this machine (${LAUNCHES} at once, request → running; ${image}, ${CORES} core, ${MEMORY_MB} MiB each; default WORKER_CONCURRENCY; ${ROUNDS} rounds, median)`);
    for (const count of WORKER_COUNTS) {
      const figures = perMinute.get(count)!;
      console.log(`  ${String(count).padStart(2)} worker${count === 1 ? ' ' : 's'}  ${median(figures).toFixed(1).padStart(6)} launches/min   ratio to ${WORKER_COUNTS[0]} worker ${(median(figures) / baseline).toFixed(2)}   (per round ${figures.map((f) => f.toFixed(1)).join(' ')}; placement ${splits.get(count)!.join(' | ')})`);
    }
    console.log('  both engines and every worker share this machine\'s cores: more workers add job slots, not CPU; see docs/scaling.md');
  } finally {
    await cleanUp();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
