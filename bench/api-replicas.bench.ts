/**
 * Issue 24 bench: get_user throughput through HAProxy (Debian's, as test/e2e/load-balancer.ts runs it) with one
 * api replica behind it and with two, as a ratio measured in the same run (alternating rounds, medians), plus
 * the one replica without a balancer (the balancer's own cost). Every api is a process of its own on one
 * database and Redis prefix; autocannon runs in this process.
 *
 * What a 2-core machine can show: that a second replica costs nothing and loses nothing (ratio ≈ 1, zero
 * errors), and what the balancer adds per request. What it cannot show: a speed-up. The load generator,
 * HAProxy, PostgreSQL and both node processes share the same two cores, so one api process already gets
 * about all the CPU that is left; a ratio above 1 needs replicas on cores (or hosts) of their own.
 */
import 'reflect-metadata';
import { cpus } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { toWireId } from '@ws/common';
import { UsersService } from '@ws/users';
import { ApiReplica, LoadBalancer } from '../test/e2e/load-balancer';
import { benchDeployment, freePort, registerLocalDesktop, treeCpuMs, withSetupApi } from './harness';
import { median } from './stats';

const ROOT = join(__dirname, '..');
const SECONDS = Number(process.env.BENCH_REPLICAS_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_REPLICAS_ROUNDS ?? 4);
const CONNECTIONS = Number(process.env.BENCH_REPLICAS_CONNECTIONS ?? 32);

interface Figures {
  rps: number;
  p99: number;
  errors: number;
  /** CPU time of the api processes per answered request. */
  cpuUs: number;
}

async function load(url: string, body: object, pids: number[]): Promise<Figures> {
  const before = pids.reduce((n, pid) => n + treeCpuMs(pid), 0);
  const result = await autocannon({ url, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), connections: CONNECTIONS, duration: SECONDS, timeout: 10 });
  const cpuUs = ((pids.reduce((n, pid) => n + treeCpuMs(pid), 0) - before) * 1000) / Math.max(1, result.requests.total);
  return { rps: result.requests.average, p99: result.latency.p99, errors: result.errors + result.timeouts + result.non2xx, cpuUs };
}

const fmt = (runs: Figures[]) =>
  `${median(runs.map((f) => f.rps)).toFixed(0).padStart(7)} req/s   p99 ${median(runs.map((f) => f.p99)).toFixed(1).padStart(6)} ms   ${median(runs.map((f) => f.cpuUs)).toFixed(0).padStart(5)} µs api CPU/req   errors ${runs.reduce((n, f) => n + f.errors, 0)}`;

async function main(): Promise<void> {
  const deployment = await benchDeployment('replicas');
  const { settings } = deployment;
  const replicas: ApiReplica[] = [];
  const balancers: LoadBalancer[] = [];
  try {
    const { auth, userId } = await withSetupApi(settings, async (setup) => {
      const { auth: admin } = await registerLocalDesktop(setup, { name: 'bench/desktop:1', friendlyName: 'Desktop', cores: 1, memory: 1024 ** 3 });
      const user = await setup.get(UsersService).create({ username: 'bench-replica', first_name: 'Bench', last_name: 'Replica' });
      return { auth: admin, userId: toWireId(user.id) };
    });
    const entry = join(ROOT, 'apps/api/src/main.js');
    const extra = { TRUSTED_PROXIES: '127.0.0.1', LOG_LEVEL: 'warn' };
    for (const name of ['a1', 'a2']) replicas.push(ApiReplica.spawn(name, await freePort(), settings, extra, entry));
    await Promise.all(replicas.map((r) => r.ready()));
    const [a1, a2] = replicas;
    const one = await LoadBalancer.start({ port: await freePort(), servers: [{ name: 'a1', port: a1.port }] });
    balancers.push(one);
    const two = await LoadBalancer.start({ port: await freePort(), servers: [a1, a2].map((r) => ({ name: r.name, port: r.port })) });
    balancers.push(two);
    await one.serving(['a1']);
    await two.serving(['a1', 'a2']);

    const body = { ...auth, target_user: { user_id: userId } };
    const targets = { direct: { base: a1.base, pids: [a1.pid] }, one: { base: one.base, pids: [a1.pid] }, two: { base: two.base, pids: [a1.pid, a2.pid] } };
    for (const { base } of Object.values(targets)) {
      const res = await fetch(`${base}/api/public/get_user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (res.status !== 200) throw new Error(`get_user at ${base} answered ${res.status}: ${await res.text()}`);
    }
    const url = (base: string) => `${base}/api/public/get_user`;
    // Warm up (JIT, pools), then alternate rounds so background load on the shared machine hits each alike.
    for (const t of Object.values(targets)) await load(url(t.base), body, t.pids);
    const runs = { direct: [] as Figures[], one: [] as Figures[], two: [] as Figures[] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = (round % 2 === 0 ? ['direct', 'one', 'two'] : ['two', 'one', 'direct']) as Array<keyof typeof targets>;
      for (const side of order) runs[side].push(await load(url(targets[side].base), body, targets[side].pids));
    }
    const ratio = median(runs.two.map((f, i) => f.rps / runs.one[i].rps));
    const proxied = median(runs.one.map((f, i) => f.rps / runs.direct[i].rps));
    console.log(`\nget_user through HAProxy (autocannon, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS} s; this machine: ${cpus().length} cores)`);
    console.log(`  one replica, no balancer   ${fmt(runs.direct)}`);
    console.log(`  HAProxy, one replica       ${fmt(runs.one)}`);
    console.log(`  HAProxy, two replicas      ${fmt(runs.two)}`);
    console.log(`  ratio two/one replicas requests/s ${ratio.toFixed(2)} (per round: ${runs.two.map((f, i) => (f.rps / runs.one[i].rps).toFixed(2)).join(' ')})   HAProxy/direct with one replica ${proxied.toFixed(2)}`);
    console.log('  a ratio above 1 needs cores the load generator, HAProxy and PostgreSQL do not already use; see docs/scaling.md');
  } finally {
    for (const lb of balancers) await lb.stop().catch(() => undefined);
    for (const r of replicas) await r.stop().catch(() => undefined);
    await deployment.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
