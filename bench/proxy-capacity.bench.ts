/**
 * Issue 4, second view of the stream gateway: its capacity. Against the reference desktop the VNC server's
 * update cycle sets the pace (stream-gateway.bench.ts); here a synthetic RFB server answers every request at
 * once from memory, so the proxy in the path is the limit. The gateway's session (RfbSession over pooled reads,
 * in a process of its own) and Debian's websockify take turns on the same server.
 */
import { ChildProcess, fork, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { freePort, treeCpuMs } from './processes';
import { RfbBenchClient, Transport } from './rfb-bench-client';
import { median, percentile } from './stats';

const ROUNDS = Number(process.env.BENCH_CAPACITY_ROUNDS ?? 10);
const STREAM_MS = Number(process.env.BENCH_STREAM_MS ?? 1000);

function forkListening(script: string, args: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = fork(join(__dirname, script), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const timer = setTimeout(() => reject(new Error(`${script} did not start`)), 15_000);
    child.once('message', () => (clearTimeout(timer), resolve(child)));
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`${script} exited with ${code}`))));
  });
}

async function portTaken(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(false)).listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
    });
    if (!free) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

async function stream(transport: Transport, proxyPid: number): Promise<{ mbPerSec: number; cpuMsPerMiB: number }> {
  const client = await RfbBenchClient.open(transport);
  try {
    await client.roundTrip(0, 0, client.width, client.height); // warm up: one full frame
    const before = treeCpuMs(proxyPid);
    const streamed = await client.stream(STREAM_MS, 3);
    const mib = streamed.bytes / 1024 / 1024;
    return { mbPerSec: mib / (streamed.ms / 1000), cpuMsPerMiB: (treeCpuMs(proxyPid) - before) / mib };
  } finally {
    client.end();
  }
}

async function main(): Promise<void> {
  const children: ChildProcess[] = [];
  try {
    const [serverPort, sessionPort, websockifyPort] = [await freePort(), await freePort(), await freePort()];
    children.push(await forkListening('synthetic-rfb-server.js', [String(serverPort)]));
    const session = await forkListening('session-proxy.js', [String(sessionPort), String(serverPort)]);
    children.push(session);
    const websockify = spawn('websockify', [`127.0.0.1:${websockifyPort}`, `127.0.0.1:${serverPort}`], { stdio: 'ignore' });
    children.push(websockify);
    await portTaken(websockifyPort);

    const paths: Array<[string, Transport, number]> = [
      ['gateway session', { kind: 'ws', url: `ws://127.0.0.1:${sessionPort}/` }, session.pid!],
      ['websockify', { kind: 'ws', url: `ws://127.0.0.1:${websockifyPort}/`, protocols: ['binary'] }, websockify.pid!],
    ];
    const results = new Map<string, Array<{ mbPerSec: number; cpuMsPerMiB: number }>>(paths.map(([name]) => [name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < paths.length; i++) {
        const [name, transport, pid] = paths[(round + i) % paths.length];
        results.get(name)!.push(await stream(transport, pid));
      }
    }
    console.log(`\nProxy capacity: a synthetic RFB server answering at once, ${ROUNDS} rounds × ${STREAM_MS / 1000} s of full 1024×768 Raw frames per proxy, taking turns`);
    for (const [name, runs] of results) {
      console.log(`${name.padEnd(24)} throughput ${median(runs.map((r) => r.mbPerSec)).toFixed(0).padStart(6)} MiB/s   proxy CPU ${median(runs.map((r) => r.cpuMsPerMiB)).toFixed(2)} ms per MiB`);
    }
    const [gateway, wsfy] = paths.map(([name]) => results.get(name)!);
    const ratios = gateway.map((g, i) => g.mbPerSec / wsfy[i].mbPerSec);
    console.log(`gateway session throughput vs websockify, median of per-round ratios: ${median(ratios).toFixed(2)}× (middle half ${percentile(ratios, 25).toFixed(2)}–${percentile(ratios, 75).toFixed(2)})`);
  } finally {
    for (const child of children) child.kill('SIGTERM');
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
