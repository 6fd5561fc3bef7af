import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import Redis from 'ioredis';
import { freePort, waitFor } from './harness';

/** Debian's redis-server, when installed (npm test installs it). */
export const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => existsSync(p));

/**
 * A redis-server of one test on a free loopback port, without persistence (a restart comes back empty): tests
 * that stop, pause or restart Redis do it to this one, never to the shared server other suites use.
 */
export class PrivateRedis {
  private constructor(
    private child: ChildProcess,
    readonly port: number,
    private readonly binary: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(binary = REDIS_SERVER): Promise<PrivateRedis> {
    if (!binary) throw new Error('redis-server is needed for this test');
    const port = await freePort();
    const redis = new PrivateRedis(PrivateRedis.spawn(binary, port), port, binary);
    await redis.ready();
    return redis;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Again on the same port (an empty data set: nothing is persisted). */
  async restart(): Promise<void> {
    await this.stop();
    this.child = PrivateRedis.spawn(this.binary, this.port);
    await this.ready();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    await exited;
  }

  /** Every client's commands wait until `ms` have passed (the server stalls; connections stay open). */
  async pause(ms: number): Promise<unknown> {
    return this.command(['CLIENT', 'PAUSE', String(ms), 'ALL']);
  }

  private static spawn(binary: string, port: number): ChildProcess {
    return spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  }

  private async ready(): Promise<void> {
    const child = this.child;
    await waitFor('private redis-server', async () => {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
      return (await this.command(['PING']).catch(() => undefined)) === 'PONG' ? true : undefined;
    }, 30_000, 100);
  }

  private async command([name, ...args]: string[]): Promise<unknown> {
    const client = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await client.connect();
      return await client.call(name, ...args);
    } finally {
      client.disconnect();
    }
  }
}
