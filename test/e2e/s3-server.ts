import { ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { AppConfig } from '@ws/common';

export interface S3Server {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The settings that point an api's (or a store's) s3:// urls at this server: endpoint, path-style addressing, credentials. */
  settings: Pick<AppConfig, 'S3_ENDPOINT' | 'S3_FORCE_PATH_STYLE' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY'>;
  stop(): Promise<void>;
}

/**
 * A real S3-compatible server (scripts/s3-server.js: s3rver, which verifies SigV4 signatures and presigned
 * expiry) in a child process on a free loopback port, storing under `dir`, with `bucket` created. Its own
 * process, so its memory never counts in the tests' RSS measurements.
 */
export async function startS3Server(dir: string, bucket: string): Promise<S3Server> {
  const child = spawn(process.execPath, [`${__dirname}/../../scripts/s3-server.js`, '--dir', dir, '--bucket', bucket, '--port', '0', '--stop-on-stdin-close', 'yes'], {
    // Its stdin is a pipe from this process: if jest dies without stop(), the pipe closes and the server exits.
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const endpoint = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('s3 server did not start within 60 s')), 60_000);
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      const match = /^listening (http:\/\/127\.0\.0\.1:\d+)$/.exec(line.trim());
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`s3 server exited with ${code} before listening`));
    });
  });
  const key = 'S3RVER'; // s3rver's own access key id and secret
  return {
    endpoint, bucket, accessKeyId: key, secretAccessKey: key,
    settings: { S3_ENDPOINT: endpoint, S3_FORCE_PATH_STYLE: true, S3_ACCESS_KEY_ID: key, S3_SECRET_ACCESS_KEY: key },
    stop: () => stopChild(child),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
