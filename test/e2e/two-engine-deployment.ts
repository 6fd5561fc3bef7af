/**
 * A scaled-out deployment on this machine (issue 24): two Docker engines (this machine's and a SecondEngine, both
 * registered with `server add`, the second over mutual TLS), the api in this process and N worker processes (real
 * processes on the compiled worker, WorkerProcess) sharing its database and Redis prefix. For the suites and
 * benches about several workers over several hosts; `close()` removes everything it made.
 */
import type { AppConfig } from '@ws/common';
import { DockerHost, LABELS } from '@ws/agent';
import { runCli as cli, useApiForCli } from './cli-runner';
import { desktopImage, localDocker, TestApi } from './harness';
import { SecondEngine } from './second-engine';
import { WorkerProcess } from './worker-processes';

export interface TwoEngineDeploymentOptions {
  /** Worker processes started (and waited for) before start() answers. */
  workers: number;
  /** Settings of the api and of every worker (WORKER_CONCURRENCY, SERVER_HEALTH_INTERVAL_MS, …). */
  settings?: Partial<AppConfig>;
  /** Cores each engine offers placement: the same on both, so that placement spreads evenly. */
  coresPerEngine?: number;
}

export type EngineName = 'local' | 'second';

/** A container of this deployment, and the engine it is on. */
export interface DeploymentContainer {
  engine: EngineName;
  id: string;
  name: string;
  state: string;
  workspaceId: string;
}

/** A container Docker reported made (`create`) or removed (`destroy`) on one engine. */
export interface ContainerChange {
  engine: EngineName;
  action: 'create' | 'destroy';
  id: string;
  name: string;
  workspaceId: string;
}

/** Runs the CLI with its progress lines (stderr) kept out of the test's output. */
async function quietCli(...args: string[]): Promise<string> {
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    return await cli(...args);
  } finally {
    spy.mockRestore();
  }
}

export class TwoEngineDeployment {
  readonly workers: WorkerProcess[] = [];
  private readonly watches: Array<() => void> = [];

  private constructor(
    readonly api: TestApi,
    readonly engine: SecondEngine,
    private readonly restoreCliEnv: () => Promise<void>,
  ) {}

  static async start(options: TwoEngineDeploymentOptions): Promise<TwoEngineDeployment> {
    const cores = String(options.coresPerEngine ?? 8);
    const engine = await SecondEngine.start();
    let deployment: TwoEngineDeployment | undefined;
    try {
      const api = await TestApi.start(options.settings ?? {});
      const created = new TwoEngineDeployment(api, engine, useApiForCli(api));
      deployment = created;
      await cli('server', 'add', 'local', '--endpoint', 'unix:///var/run/docker.sock', '--cores', cores, '--memory', '64G');
      await cli('server', 'add', 'second', '--endpoint', engine.endpoint, '--publish-host', '127.0.0.1', '--cores', cores, '--memory', '64G',
        '--tls-ca', engine.tls.ca, '--tls-cert', engine.tls.cert, '--tls-key', engine.tls.key);
      const started = Array.from({ length: options.workers }, () => created.spawnWorker());
      // Several node processes booting at once on a busy 2-core machine: a generous bound.
      await Promise.all(started.map((w) => w.ready(180_000)));
      return created;
    } catch (err) {
      if (deployment) await deployment.close();
      else await engine.stop();
      throw err;
    }
  }

  /** A worker process on the deployment's settings (plus `extra`), kept for close(). */
  spawnWorker(extra: Record<string, string> = {}): WorkerProcess {
    const worker = WorkerProcess.spawn(this.api.settings, extra);
    this.workers.push(worker);
    return worker;
  }

  /**
   * Registers the reference desktop for any server and copies it onto the second engine through the service
   * (`image add --distribute`: docker save → docker load); answers the image's wire id.
   */
  async addDesktop(friendlyName: string, flags: string[] = []): Promise<string> {
    const added = JSON.parse(await quietCli('image', 'add', desktopImage(), '--friendly-name', friendlyName, ...flags, '--distribute', '--json'));
    if (!(await this.engine.host().imageExists(desktopImage()))) throw new Error('image add --distribute did not copy the desktop onto the second engine');
    return added.image_id as string;
  }

  engines(): Array<{ engine: EngineName; host: DockerHost }> {
    return [{ engine: 'local', host: localDocker() }, { engine: 'second', host: this.engine.host() }];
  }

  /** This deployment's containers on both engines. */
  async containers(): Promise<DeploymentContainer[]> {
    const all = await Promise.all(this.engines().map(async ({ engine, host }) =>
      (await host.listByLabels({ [LABELS.deploymentId]: this.api.config.DEPLOYMENT_ID })).map((c) => ({
        engine, id: c.id, name: c.name, state: c.state, workspaceId: c.labels[LABELS.workspaceId] ?? '',
      }))));
    return all.flat();
  }

  /**
   * Records, from now until close(), every container of this deployment that either engine makes or removes, as
   * Docker's events API reports them: what was ever created, including containers gone before anyone listed them.
   */
  async recordContainerChanges(): Promise<ContainerChange[]> {
    const changes: ContainerChange[] = [];
    // A second back: the stream is open only once the call answers; nothing of this deployment exists before now.
    const since = Math.floor(Date.now() / 1000) - 1;
    for (const { engine, host } of this.engines()) {
      const stream = await host.docker.getEvents({
        since, filters: { type: ['container'], event: ['create', 'destroy'], label: [`${LABELS.deploymentId}=${this.api.config.DEPLOYMENT_ID}`] },
      });
      let pending = '';
      stream.on('data', (chunk: Buffer) => {
        const lines = (pending + chunk.toString()).split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines.filter(Boolean)) {
          const event = JSON.parse(line) as { Action: 'create' | 'destroy'; Actor: { ID: string; Attributes: Record<string, string> } };
          changes.push({ engine, action: event.Action, id: event.Actor.ID, name: event.Actor.Attributes.name ?? '', workspaceId: event.Actor.Attributes[LABELS.workspaceId] ?? '' });
        }
      });
      stream.on('error', () => undefined);
      this.watches.push(() => (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.());
    }
    return changes;
  }

  /** Kills the workers, then removes the api's database, the engines' containers and the second engine. */
  async close(): Promise<void> {
    for (const stop of this.watches) stop();
    for (const w of this.workers) await w.kill('SIGKILL').catch(() => undefined);
    await this.restoreCliEnv();
    await this.api.close();
    await this.engine.stop();
  }
}
