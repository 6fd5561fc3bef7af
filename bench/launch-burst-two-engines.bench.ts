/**
 * Issue 24 benchmark: bench/launch-burst.bench.ts over two engines. A burst of BENCH_BURST_TWO (16) launches at once
 * (request_workspace → every one `running` as a polling integrator sees it) against as many bare `docker run`s at
 * once split evenly over the same two engines (until each VNC port answers), in alternating rounds of one run;
 * target ratio ≤ 1.15. The second engine is a dockerd of its own on this machine (test/e2e/second-engine.ts, mutual
 * TLS), registered as a server with the same capacity as the first so placement spreads the burst, the image copied
 * to it through the service. One worker with a job slot per launch (WORKER_CONCURRENCY = the burst), as the bare
 * side starts all at once; bench/worker-pool.bench.ts measures the worker pool itself. The worker runs as a process
 * of its own, as deployed (BENCH_BURST_WORKER=inline runs it in the bench's process, beside the api and the
 * integrator's side, as the bench did before 2026-11-28).
 */
import 'reflect-metadata';
import { resolve } from 'node:path';
import { SecondEngine } from '../test/e2e/second-engine';
import { WorkerProcess } from '../test/e2e/worker-processes';
import { BENCH_SERVER_CAPACITY, BURST_FOLLOW, burstLine, compareBursts, LOCAL_ENGINE, networkPoolOf, registerSecondEngine } from './engines';
import { cleanUpOnSignal, createUsers, desktopImage, registerLocalDesktop, startBenchApi } from './harness';

const BURST = Number(process.env.BENCH_BURST_TWO ?? 16);
const ROUNDS = Number(process.env.BENCH_BURST_ROUNDS ?? 3);
/** Network holders per engine (NETWORK_POOL_SIZE): one per launch the burst puts there; BENCH_NETWORK_POOL=0 keeps none. */
const NETWORK_POOL = Number(process.env.BENCH_NETWORK_POOL ?? Math.ceil(BURST / 2));
// 16 integrators polling every 50 ms would be ~320 requests/s on the same two cores as the launches.
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 100);
const CORES = 1;
const MEMORY_MB = 512;
const WORKER_SHAPE = process.env.BENCH_BURST_WORKER === 'inline' ? 'inline' : 'process';
/** The compiled worker (npm run bench builds dist/ and runs this file from dist/bench). */
const WORKER_JS = process.env.BENCH_WORKER_JS ?? resolve(__dirname, '../apps/worker/src/main.js');

async function main(): Promise<void> {
  const image = desktopImage();
  let engine: SecondEngine | undefined;
  const workerSettings = { WORKER_CONCURRENCY: BURST, WEBHOOK_ALLOW_PRIVATE_ADDRESSES: true, NETWORK_POOL_SIZE: NETWORK_POOL, NETWORK_POOL_IMAGE: image };
  const bench = await startBenchApi({ worker: WORKER_SHAPE === 'inline', settings: workerSettings });
  const { base } = bench;
  let worker: WorkerProcess | undefined;
  const cleanUp = async () => {
    try {
      await worker?.kill('SIGTERM', 30_000).catch(() => worker?.kill('SIGKILL', 10_000));
      await bench.close();
    } finally {
      await engine?.stop();
    }
  };
  cleanUpOnSignal(cleanUp);
  try {
    engine = await SecondEngine.start({ tag: 'lb2' });
    const { image: img, auth } = await registerLocalDesktop(bench.api, { name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2 }, BENCH_SERVER_CAPACITY);
    const second = await registerSecondEngine(bench.api, engine, image);
    const userIds = await createUsers(base, auth, 'burst', BURST);
    if (WORKER_SHAPE === 'process') {
      worker = WorkerProcess.spawn({ ...bench.settings, ...workerSettings }, {}, WORKER_JS);
      await worker.ready(90_000);
    }
    const comparison = await compareBursts({
      base, auth, userIds, imageId: img.id, image, deploymentId: bench.settings.DEPLOYMENT_ID,
      engines: [LOCAL_ENGINE, second.engine], resources: { cores: CORES, memoryMb: MEMORY_MB }, rounds: ROUNDS, pollMs: POLL_MS, follow: BURST_FOLLOW,
      pool: networkPoolOf(bench.api, NETWORK_POOL),
    });
    console.log(`\nburst of ${BURST} launches over two engines on this machine (${image}, ${CORES} core, ${MEMORY_MB} MiB each; the worker ${WORKER_SHAPE === 'process' ? 'in a process of its own' : 'in the api\'s process'}; image copied to the second in ${(second.copyMs / 1000).toFixed(1)} s; ${ROUNDS} rounds, median)`);
    console.log(burstLine(BURST, comparison));
    console.log(`  placement per round: ${comparison.splits.join(' | ')}   bare: ${BURST / 2} on each   (target ratio ≤ 1.15)`);
  } finally {
    await cleanUp();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
