/**
 * The benchmarks' RFB client in a process of its own, as a browser would be. In the benchmark's own process it
 * shares a heap with the api modules loaded for setup, and its garbage collections then cost it several times
 * more CPU per MiB, which on two cores slows whatever it measures. The parent sends jobs over IPC.
 */
import { ChildProcess, fork } from 'node:child_process';
import { treeCpuMs } from './harness';
import { RfbBenchClient, Transport } from './rfb-bench-client';

export type ClientJob =
  | { op: 'latency'; transport: Transport; password?: string; roundTrips: number }
  | { op: 'throughput'; transport: Transport; password?: string; durationMs: number; serverPid: number; proxyPid?: number };

export interface Throughput {
  mbPerSec: number;
  /** CPU the proxy process (with its children) spent per MiB streamed, ms; 0 for the direct path. */
  proxyCpuMsPerMiB: number;
  /** CPU the client process spent per MiB received, ms (websocket decoding shows here). */
  clientCpuMsPerMiB: number;
  /** CPU of the VNC server's processes per MiB, ms. */
  serverCpuMsPerMiB: number;
}

/** 1×1 round trips on one connection, µs each. */
async function latency(job: Extract<ClientJob, { op: 'latency' }>): Promise<number[]> {
  const client = await RfbBenchClient.open(job.transport, job.password);
  try {
    await client.roundTrip(0, 0, client.width, client.height); // warm up: one full frame
    const latencyUs: number[] = [];
    for (let i = 0; i < job.roundTrips; i++) {
      // A random pause first: the request then meets the server's update loop at a random phase, so an added
      // delay shifts the whole distribution instead of hiding inside the loop's period.
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 12)));
      const start = process.hrtime.bigint();
      await client.roundTrip(i % 64, 0, 1, 1);
      latencyUs.push(Number(process.hrtime.bigint() - start) / 1000);
    }
    return latencyUs;
  } finally {
    client.end();
  }
}

/** Full Raw frames with 3 requests in flight on a fresh connection, with the CPU each side spent meanwhile. */
async function throughput(job: Extract<ClientJob, { op: 'throughput' }>): Promise<Throughput> {
  const client = await RfbBenchClient.open(job.transport, job.password);
  try {
    await client.roundTrip(0, 0, client.width, client.height); // warm up: one full frame
    const proxyBefore = job.proxyPid ? treeCpuMs(job.proxyPid) : 0;
    const serverBefore = treeCpuMs(job.serverPid);
    const clientBefore = process.cpuUsage();
    const streamed = await client.stream(job.durationMs, 3);
    const clientCpu = process.cpuUsage(clientBefore);
    const serverCpuMs = treeCpuMs(job.serverPid) - serverBefore;
    const proxyCpuMs = job.proxyPid ? treeCpuMs(job.proxyPid) - proxyBefore : 0;
    const mib = streamed.bytes / 1024 / 1024;
    return {
      mbPerSec: mib / (streamed.ms / 1000),
      proxyCpuMsPerMiB: proxyCpuMs / mib,
      clientCpuMsPerMiB: (clientCpu.user + clientCpu.system) / 1000 / mib,
      serverCpuMsPerMiB: serverCpuMs / mib,
    };
  } finally {
    client.end();
  }
}

/** The parent's handle on the client process: one job at a time. */
export class ClientProcess {
  private nextId = 0;

  private constructor(private readonly child: ChildProcess) {}

  static start(): ClientProcess {
    return new ClientProcess(fork(__filename, [], { stdio: 'inherit' }));
  }

  run(job: Extract<ClientJob, { op: 'latency' }>): Promise<number[]>;
  run(job: Extract<ClientJob, { op: 'throughput' }>): Promise<Throughput>;
  run(job: ClientJob): Promise<unknown> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const onMessage = (message: { id: number; result?: unknown; error?: string }) => {
        if (message.id !== id) return;
        cleanup();
        if (message.error !== undefined) reject(new Error(message.error));
        else resolve(message.result);
      };
      const onExit = (code: number | null) => (cleanup(), reject(new Error(`the client process exited (${code})`)));
      const cleanup = () => this.child.off('message', onMessage).off('exit', onExit);
      this.child.on('message', onMessage).on('exit', onExit);
      this.child.send({ id, job });
    });
  }

  stop(): void {
    this.child.kill('SIGTERM');
  }
}

if (require.main === module) {
  process.on('message', (message: { id: number; job: ClientJob }) => {
    const work = message.job.op === 'latency' ? latency(message.job) : throughput(message.job);
    work.then(
      (result) => process.send?.({ id: message.id, result }),
      (err: Error) => process.send?.({ id: message.id, error: err.message }),
    );
  });
}
