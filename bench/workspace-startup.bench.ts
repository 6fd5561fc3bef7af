/**
 * Issue 3 benchmark: time from request_workspace until a polling integrator sees `running`, against a bare
 * `docker run` of the same image with the same limits until its VNC port answers, interleaved in one run.
 */
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { ApiKeysService } from '@ws/auth';
import { loadConfig, randomSecret } from '@ws/common';
import { dropDatabase, migrate } from '@ws/database';
import { ImagesService } from '@ws/images';
import { ServersService } from '@ws/servers';
import { ZonesService } from '@ws/zones';
import { waitForRfb } from '@ws/agent';
import { createApi } from '../apps/api/src/bootstrap';
import { createWorker } from '../apps/worker/src/bootstrap';
import { post } from './harness';
import { median, row } from './stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
const CORES = 1;
const MEMORY_MB = 512;

function docker(...args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8' }).trim();
}

async function bareDockerRun(image: string): Promise<number> {
  const start = performance.now();
  const id = docker('run', '-d', '--rm', '--cpus', String(CORES), '--memory', `${MEMORY_MB}m`, '-p', '127.0.0.1::5900', image);
  try {
    const port = Number(docker('port', id, '5900/tcp').split('\n')[0].split(':').pop());
    await waitForRfb('127.0.0.1', port, { timeoutMs: 60_000 });
    return performance.now() - start;
  } finally {
    docker('rm', '-f', id);
  }
}

async function main(): Promise<void> {
  const image = process.env.WS_TEST_DESKTOP_IMAGE ?? execFileSync('bash', ['scripts/build-desktop-image.sh'], { encoding: 'utf8' }).trim().split('\n').pop()!;
  const suffix = randomSecret(4);
  const settings = { DATABASE_NAME: `ws_bench_${suffix}`, REDIS_PREFIX: `wsbench-${suffix}`, DEPLOYMENT_ID: `bench-${suffix}`, LOG_LEVEL: 'warn', API_PORT: 0 };
  const config = Object.assign(loadConfig(), settings);
  await migrate(config, settings.DATABASE_NAME);
  const api = await createApi(settings);
  await api.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(api.getHttpServer().address() as AddressInfo).port}`;
  const worker = await createWorker(settings);
  try {
    const zone = await api.get(ZonesService).ensure('default');
    await api.get(ServersService).upsert({ hostname: 'local', dockerEndpoint: 'unix:///var/run/docker.sock', zone, cores: 64, memory: 256 * 1024 ** 3 });
    const img = await api.get(ImagesService).upsert({ name: image, friendlyName: 'Desktop', cores: CORES, memory: MEMORY_MB * 1024 ** 2 });
    const { key, secret } = await api.get(ApiKeysService).create({ name: 'bench', permissions: ['Global Admin'] });
    const auth = { api_key: key.apiKey, api_key_secret: secret };
    const user = (await post(base, 'create_user', { ...auth, target_user: { username: 'bench' } })).user as { user_id: string };

    const ours: number[] = [];
    const bare: number[] = [];
    await bareDockerRun(image); // warm the page cache for both sides
    for (let round = 0; round < ROUNDS; round++) {
      const start = performance.now();
      const requested = await post(base, 'request_workspace', { ...auth, user_id: user.user_id, image_id: img.id });
      const workspaceId = requested.workspace_id as string;
      for (let i = 0; i < 60_000 / POLL_MS; i++) {
        const status = await post(base, 'get_workspace_status', { ...auth, user_id: user.user_id, workspace_id: workspaceId, skip_agent_check: true });
        if ((status.workspace as { operational_status?: string } | undefined)?.operational_status === 'running') break;
        if (status.operational_status === 'stopped') throw new Error(`workspace failed: ${JSON.stringify(status)}`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      ours.push(performance.now() - start);
      await post(base, 'destroy_workspace', { ...auth, workspace_id: workspaceId });
      bare.push(await bareDockerRun(image));
    }
    console.log(`\nworkspace startup (${image}, ${CORES} core, ${MEMORY_MB} MiB, integrator polls every ${POLL_MS} ms)`);
    console.log(row('request_workspace → running (polling)', ours));
    console.log(row('bare docker run → VNC answers (baseline)', bare));
    console.log(`ratio at p50: ${(median(ours) / median(bare)).toFixed(2)}  (target ≤ 1.30)`);
  } finally {
    await worker.close();
    await api.close();
    for (const id of docker('ps', '-aq', '--filter', `label=workspace-server.deployment-id=${settings.DEPLOYMENT_ID}`).split('\n').filter(Boolean)) docker('rm', '-f', id);
    await dropDatabase(config, settings.DATABASE_NAME);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
