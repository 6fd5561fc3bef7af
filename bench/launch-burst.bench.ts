/**
 * Issue 24 benchmark: a burst of BENCH_BURST (8) launches at once, request_workspace → every one `running` as a
 * polling integrator sees it, against the same number of bare `docker run`s at once until each VNC port answers,
 * in alternating rounds of one run. Placement, the seat and the outbox are the launches' shared points.
 * bench/launch-burst-two-engines.bench.ts is the same over two engines.
 */
import 'reflect-metadata';
import { BURST_FOLLOW, burstLine, compareBursts, LOCAL_ENGINE, networkPoolOf } from './engines';
import { createUsers, desktopImage, registerLocalDesktop, startBenchApi } from './harness';

const BURST = Number(process.env.BENCH_BURST ?? 8);
const ROUNDS = Number(process.env.BENCH_BURST_ROUNDS ?? 3);
/** Network holders per engine (NETWORK_POOL_SIZE): one per launch the burst puts there; BENCH_NETWORK_POOL=0 keeps none. */
const NETWORK_POOL = Number(process.env.BENCH_NETWORK_POOL ?? Math.ceil(BURST));
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
const CORES = 1;
const MEMORY_MB = 512;

async function main(): Promise<void> {
  const image = desktopImage();
  const bench = await startBenchApi({ worker: true, settings: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: true, NETWORK_POOL_SIZE: NETWORK_POOL, NETWORK_POOL_IMAGE: image } });
  const { base } = bench;
  try {
    const { image: img, auth } = await registerLocalDesktop(bench.api, { name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2 });
    const userIds = await createUsers(base, auth, 'burst', BURST);
    const comparison = await compareBursts({
      base, auth, userIds, imageId: img.id, image, deploymentId: bench.settings.DEPLOYMENT_ID,
      engines: [LOCAL_ENGINE], resources: { cores: CORES, memoryMb: MEMORY_MB }, rounds: ROUNDS, pollMs: POLL_MS, follow: BURST_FOLLOW,
      pool: networkPoolOf(bench.api, NETWORK_POOL),
    });
    console.log(`\nburst of ${BURST} launches (${image}, ${CORES} core, ${MEMORY_MB} MiB each; ${ROUNDS} rounds, median)`);
    console.log(burstLine(BURST, comparison));
  } finally {
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
