/**
 * Issue 11 benchmark: saving a 100 MiB home (random data) as a persistent profile through the real save path
 * (ProfileSync.save: Docker's archive of the home, byte counter, verified put of a new generation, pointer
 * switch, previous generation deleted) against a baseline by hand in the same run: the same Docker archive
 * piped straight into the same store's put. Both file:// and s3:// (the project's S3 test server); interleaved.
 */
import 'reflect-metadata';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { desktopImage, withSetupApi, benchDeployment } from './harness';
import { median, row } from './stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HOME_MIB = Number(process.env.BENCH_PROFILE_MIB ?? 100);
const HOME = '/home/workspace';

function docker(...args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8' }).trim();
}

/** scripts/s3-server.js (s3rver) on a free loopback port, as the e2e tests run it. */
async function startS3(dir: string, bucket: string): Promise<{ endpoint: string; stop: () => void }> {
  const child = spawn(process.execPath, [join(__dirname, '..', '..', 'scripts', 's3-server.js'), '--dir', dir, '--bucket', bucket, '--port', '0', '--stop-on-stdin-close', 'yes'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const endpoint = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('s3 server did not start within 60 s')), 60_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = /^listening (http:\/\/127\.0\.0\.1:\d+)$/.exec(line.trim());
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`s3 server exited with ${code}`)));
  });
  return { endpoint, stop: () => child.kill('SIGTERM') };
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'ws-bench-profiles-'));
  const deployment = await benchDeployment('profiles');
  const s3 = await startS3(join(scratch, 's3'), 'bench-profiles');
  const s3Settings = { S3_ENDPOINT: s3.endpoint, S3_FORCE_PATH_STYLE: true, S3_ACCESS_KEY_ID: 'S3RVER', S3_SECRET_ACCESS_KEY: 'S3RVER', S3_PART_SIZE_MB: 8 };
  // A stopped desktop container whose home holds HOME_MIB of random data, as a workspace's is at its removal.
  const container = docker('run', '-d', '--label', `workspace-server.deployment-id=${deployment.settings.DEPLOYMENT_ID}`, '--entrypoint', 'sleep', desktopImage(), 'infinity');
  try {
    docker('exec', container, 'sh', '-c', `head -c ${HOME_MIB * 1024 * 1024} /dev/urandom > ${HOME}/blob.bin`);
    docker('stop', '-t', '1', container);
    await withSetupApi({ ...deployment.settings, ...s3Settings } as typeof deployment.settings, async (app) => {
      const [{ ProfileSync }, { DockerHost }, { openStore, S3ObjectStore }, { AppConfig, newId }] = await Promise.all([
        import('@ws/profiles'), import('@ws/agent'), import('@ws/storage'), import('@ws/common'),
      ]);
      const sync = app.get(ProfileSync, { strict: false });
      const config = app.get(AppConfig, { strict: false });
      const host = DockerHost.fromEndpoint({ endpoint: 'unix:///var/run/docker.sock', name: 'local' });
      const source = { host, containerId: container, directory: HOME };
      for (const location of [`file://${join(scratch, 'profiles')}`, 's3://bench-profiles/profiles']) {
        const store = openStore(location, config);
        const ours: number[] = [];
        const byHand: number[] = [];
        let size = 0;
        for (let round = 0; round <= ROUNDS; round++) {
          let start = performance.now();
          const outcome = await sync.save(location, source, newId());
          const oursMs = performance.now() - start;
          if (!outcome.saved) throw new Error('profile refused as too large: raise PROFILE_MAX_MB');
          size = outcome.size;
          start = performance.now();
          const key = `by-hand-${round}.tar`;
          await store.put(key, await host.getArchive(container, HOME));
          const byHandMs = performance.now() - start;
          await store.delete(key);
          if (round === 0) continue; // warm-up: page cache and connections for both sides
          ours.push(oursMs);
          byHand.push(byHandMs);
        }
        if (store instanceof S3ObjectStore) store.close();
        console.log(`\npersistent profile save, ${HOME_MIB} MiB of random data in the home (tar ${(size / 1024 / 1024).toFixed(1)} MiB), ${location.split(':')[0]}://`);
        console.log(row('ProfileSync.save (verified, pointer switch)', ours));
        console.log(row('archive → store.put by hand (baseline)', byHand));
        console.log(`ratio at p50: ${(median(ours) / median(byHand)).toFixed(2)}  (the verification reads the object back once)`);
      }
    });
  } finally {
    docker('rm', '-f', container);
    s3.stop();
    await deployment.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
