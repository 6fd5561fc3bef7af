/**
 * Issue 22 benchmark: what an `Idempotency-Key` costs a creating operation. create_user with a fresh key per
 * request (the claim insert, the stored answer) against create_user without one, through the real api on
 * loopback, in alternating rounds of the same run. Target: with the key ≤ 1.15× the time without.
 */
import 'reflect-metadata';
import { ApiKeysService } from '@ws/auth';
import { startBenchApi } from './harness';
import { median } from './stats';

const REQUESTS = Number(process.env.BENCH_IDEMPOTENCY_REQUESTS ?? 400);
const ROUNDS = Number(process.env.BENCH_IDEMPOTENCY_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_IDEMPOTENCY_CONNECTIONS ?? 8);
const TARGET_RATIO = 1.15;

async function main(): Promise<void> {
  const bench = await startBenchApi({ kind: 'idempotency' });
  try {
    const { key, secret } = await bench.api.get(ApiKeysService).create({ name: 'bench', permissions: ['Global Admin'] });
    const auth = { api_key: key.apiKey, api_key_secret: secret };
    let serial = 0;
    /** Microseconds per create_user over REQUESTS requests from CONNECTIONS concurrent callers. */
    const round = async (withKey: boolean): Promise<number> => {
      let next = 0;
      const start = process.hrtime.bigint();
      await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
        while (next < REQUESTS) {
          next++;
          const n = serial++;
          const headers: Record<string, string> = { 'content-type': 'application/json' };
          if (withKey) headers['idempotency-key'] = `bench-${n}`;
          const res = await fetch(`${bench.base}/api/public/create_user`, { method: 'POST', headers, body: JSON.stringify({ ...auth, target_user: { username: `bench-${n}` } }) });
          if (res.status !== 200) throw new Error(`create_user answered ${res.status}: ${await res.text()}`);
          await res.arrayBuffer();
        }
      }));
      return Number(process.hrtime.bigint() - start) / 1000 / REQUESTS;
    };
    await round(false); // warm up
    await round(true);
    const without: number[] = [];
    const withKey: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      without.push(await round(false));
      withKey.push(await round(true));
    }
    const ratio = median(withKey) / median(without);
    console.log(`\ncreate_user with and without an Idempotency-Key (${ROUNDS} rounds of ${REQUESTS} requests, ${CONNECTIONS} concurrent; medians)`);
    console.log(`without Idempotency-Key   ${median(without).toFixed(0).padStart(8)} µs/request`);
    console.log(`with Idempotency-Key      ${median(withKey).toFixed(0).padStart(8)} µs/request   (${ratio.toFixed(2)}× without; target ≤ ${TARGET_RATIO})`);
  } finally {
    await bench.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
