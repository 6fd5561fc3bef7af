/**
 * Issue 23 sizing figures for docs/operations.md, measured on this machine:
 * - an idle api and an idle worker (each a process of its own on the compiled code): resident memory (VmRSS)
 *   10 s after they are ready;
 * - launch throughput: BENCH_SIZING_LAUNCHES request_workspace calls at once (one user each, the reference desktop,
 *   1 core and 512 MiB each) until get_workspace_status says `running` for all: launches per minute;
 * - a running, idle desktop (nobody connected): its container's memory and CPU from `docker stats --no-stream`
 *   10 s after the last one ran; and the api and worker again, with those workspaces live.
 */
import 'reflect-metadata';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { toWireId } from '@ws/common';
import { benchDeployment, benchEnv, desktopImage, freePort, post, registerLocalDesktop, until, withSetupApi } from './harness';
import { median } from './stats';

const ROOT = join(__dirname, '..');
const LAUNCHES = Number(process.env.BENCH_SIZING_LAUNCHES ?? 12);
const IDLE_MS = 10_000;

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const idle = () => new Promise((r) => setTimeout(r, IDLE_MS));

function stop(child: ChildProcess): Promise<unknown> {
  if (child.exitCode !== null) return Promise.resolve();
  child.kill('SIGTERM');
  return new Promise((r) => child.once('exit', r));
}

async function main(): Promise<void> {
  const deployment = await benchDeployment('sizing');
  const children: ChildProcess[] = [];
  try {
    const image = desktopImage(process.cwd());
    const { auth, imageId } = await withSetupApi(deployment.settings, async (setup) => {
      const registered = await registerLocalDesktop(setup, { name: image, friendlyName: 'Desktop', cores: 1, memory: 512 * 1024 ** 2 });
      return { auth: registered.auth, imageId: toWireId(registered.image.id) };
    });
    const [apiPort, workerMetrics] = await Promise.all([freePort(), freePort()]);
    const api = spawn(process.execPath, [join(ROOT, 'apps/api/src/main.js')], { env: benchEnv(deployment.settings, { API_PORT: String(apiPort), API_HOST: '127.0.0.1', LOG_LEVEL: 'warn' }), stdio: ['ignore', 'ignore', 'inherit'] });
    const worker = spawn(process.execPath, [join(ROOT, 'apps/worker/src/main.js')], { env: benchEnv(deployment.settings, { METRICS_PORT: String(workerMetrics), METRICS_HOST: '127.0.0.1', LOG_LEVEL: 'warn' }), stdio: ['ignore', 'ignore', 'inherit'] });
    children.push(api, worker);
    const base = `http://127.0.0.1:${apiPort}`;
    await until('the api ready', async () => ((await fetch(`${base}/api/health`)).ok ? true : undefined));
    await until('the worker ready', async () => ((await fetch(`http://127.0.0.1:${workerMetrics}/readyz`)).ok ? true : undefined));
    await idle();
    const idleRss = { api: rssMb(api.pid as number), worker: rssMb(worker.pid as number) };

    const users: string[] = [];
    for (let i = 0; i < LAUNCHES; i++) users.push(((await post(base, 'create_user', { ...auth, target_user: { username: `sizing-${i}` } })).user as { user_id: string }).user_id);
    const started = performance.now();
    const requested = await Promise.all(users.map((user_id) => post(base, 'request_workspace', { ...auth, user_id, image_id: imageId })));
    const ids = requested.map((r, i) => {
      const id = (r as { workspace_id?: string }).workspace_id ?? (r.workspace as { workspace_id?: string } | undefined)?.workspace_id;
      if (!id) throw new Error(`request_workspace for user ${users[i]} answered ${JSON.stringify(r)}`);
      return id;
    });
    const pending = new Set(ids.map((_, i) => i));
    await until('every workspace running', async () => {
      for (const i of [...pending]) {
        const status = await post(base, 'get_workspace_status', { ...auth, user_id: users[i], workspace_id: ids[i] });
        const state = (status.workspace as { operational_status?: string } | undefined)?.operational_status;
        if (state === 'running') pending.delete(i);
        else if (state === 'failed' || state === 'deleted') throw new Error(`workspace ${ids[i]} ${state}`);
      }
      return pending.size === 0 ? true : undefined;
    }, 300_000);
    const seconds = (performance.now() - started) / 1000;
    await idle();
    const containers = execFileSync('docker', ['ps', '-q', '--filter', `label=workspace-server.deployment-id=${deployment.settings.DEPLOYMENT_ID}`], { encoding: 'utf8' }).split('\n').filter(Boolean);
    const stats = execFileSync('docker', ['stats', '--no-stream', '--format', '{{.CPUPerc}} {{.MemUsage}}', ...containers], { encoding: 'utf8' }).split('\n').filter(Boolean);
    const toMb = (v: string) => {
      const [, n, unit] = /^([\d.]+)\s*([KMG]i?B)/.exec(v) ?? [];
      return Number(n) * ({ KiB: 1 / 1024, MiB: 1, GiB: 1024, kB: 1 / 1000, MB: 1, GB: 1000 } as Record<string, number>)[unit];
    };
    const cpu = stats.map((l) => Number(l.split(' ')[0].replace('%', '')));
    const mem = stats.map((l) => toMb(l.split(' ').slice(1).join(' ')));
    const cores = execFileSync('nproc', { encoding: 'utf8' }).trim();
    console.log(`\nSizing (this machine: ${cores} cores, shared; api and worker as processes of their own on dist/)`);
    console.log(`  idle api RSS ${idleRss.api.toFixed(0)} MiB, idle worker RSS ${idleRss.worker.toFixed(0)} MiB (VmRSS ${IDLE_MS / 1000} s after ready, no workspace)`);
    console.log(`  ${LAUNCHES} launches at once → all running in ${seconds.toFixed(1)} s: ${((LAUNCHES * 60) / seconds).toFixed(0)} launches/min (reference desktop, cold, 1 core / 512 MiB each)`);
    console.log(`  a running idle desktop (nobody connected, ${IDLE_MS / 1000} s after): median ${median(mem).toFixed(0)} MiB memory (max ${Math.max(...mem).toFixed(0)}), median ${median(cpu).toFixed(1)} % of a core (max ${Math.max(...cpu).toFixed(1)}) over ${containers.length} containers`);
    console.log(`  with them live: api RSS ${rssMb(api.pid as number).toFixed(0)} MiB, worker RSS ${rssMb(worker.pid as number).toFixed(0)} MiB`);
  } finally {
    await Promise.all(children.map(stop));
    await deployment.close();
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
