/**
 * A load generator at a constant arrival rate (open loop), for latency at a given request rate.
 *
 * Request i is due at start + i/rate. It is sent then on a free keep-alive connection, or waits in line for one, and
 * its latency is counted from when it was due: a stall anywhere (the server, the machine, this generator) shows in
 * the tail instead of quietly lowering the rate (coordinated omission).
 *
 * autocannon's `overallRate` is not that, which is why this exists: each connection sends its share of a second
 * back to back at the top of every second and then idles, so "1,000/s over 16 connections" is the server saturated
 * by 16 connections for the first part of each second; and its correction for coordinated omission takes 1 ms as
 * the expected interval whatever the rate, recording a 15 ms answer as fifteen answers of 1 to 15 ms.
 *
 * It runs in a process of its own (forked from this file), so its garbage and timers share nothing with the bench's.
 */
import { fork } from 'node:child_process';
import { Agent, request } from 'node:http';
import { percentile } from './stats';

export interface PacedOptions {
  url: string;
  /** Sent as JSON with POST, request i the body i modulo their number. */
  bodies: object[];
  /** Requests per second. */
  rate: number;
  seconds: number;
  /** Keep-alive connections at most (opened before the clock starts). */
  connections: number;
}

export interface PacedFigures {
  /** Requests answered per second over the run (from the first due time until the last answer). */
  rps: number;
  /** Latency from each request's due time to the end of its answer, ms. */
  p50: number;
  p99: number;
  /** How late this generator sent requests (its timer and its own pauses, included in the latencies), p99 in ms. */
  sendLagP99: number;
  /** Failed, timed out or not 200. */
  errors: number;
  /** This generator's CPU time per request, µs (it shares the machine with the server). */
  generatorCpuUs: number;
}

const TIMEOUT_MS = 10_000;

/** Runs one paced load in a child process and answers its figures. */
export function pacedLoad(options: PacedOptions): Promise<PacedFigures> {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['paced-load'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let figures: PacedFigures | undefined;
    const deadline = setTimeout(() => child.kill('SIGKILL'), (options.seconds + 60) * 1000);
    child.once('message', (message) => { figures = message as PacedFigures; });
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(deadline);
      if (figures) resolve(figures);
      else reject(new Error(`the paced load generator ended (${code}) without figures`));
    });
    child.send(options);
  });
}

async function run(options: PacedOptions): Promise<PacedFigures> {
  const target = new URL(options.url);
  const payloads = options.bodies.map((body) => Buffer.from(JSON.stringify(body)));
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const send = (i: number): Promise<{ ok: boolean }> => new Promise((done) => {
    const payload = payloads[i % payloads.length];
    const req = request({
      agent, host: target.hostname, port: target.port, path: target.pathname, method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': payload.length },
    }, (res) => {
      res.resume();
      res.once('end', () => done({ ok: res.statusCode === 200 }));
      res.once('error', () => done({ ok: false }));
    });
    req.setTimeout(TIMEOUT_MS, () => req.destroy(new Error('timed out')));
    req.once('error', () => done({ ok: false }));
    req.end(payload);
  });

  // Open every connection before the clock starts, as a client already running would have them.
  await Promise.all(Array.from({ length: options.connections }, (_, i) => send(i)));

  const total = Math.round(options.rate * options.seconds);
  const intervalMs = 1000 / options.rate;
  const latencies = new Float64Array(total);
  const lags = new Float64Array(total);
  let errors = 0;
  let sent = 0;
  let answered = 0;
  const cpuBefore = process.cpuUsage();
  const start = performance.now() + 1;
  let end = start;
  await new Promise<void>((finished) => {
    const sendDue = () => {
      const now = performance.now();
      while (sent < total && start + sent * intervalMs <= now) {
        const i = sent++;
        const due = start + i * intervalMs;
        lags[i] = now - due;
        void send(i).then(({ ok }) => {
          end = performance.now();
          latencies[i] = end - due;
          if (!ok) errors++;
          if (++answered === total) finished();
        });
      }
      if (sent === total) clearInterval(timer);
    };
    // Node's timers tick at best every millisecond: each tick sends what has come due, so a late tick catches up.
    const timer = setInterval(sendDue, 1);
  });
  const cpu = process.cpuUsage(cpuBefore);
  agent.destroy();
  const all = Array.from(latencies);
  return {
    rps: (total * 1000) / (end - start), p50: percentile(all, 50), p99: percentile(all, 99),
    sendLagP99: percentile(Array.from(lags), 99), errors, generatorCpuUs: (cpu.user + cpu.system) / total,
  };
}

if (process.argv[2] === 'paced-load') {
  process.once('message', (options) => {
    run(options as PacedOptions).then(
      (figures) => process.send?.(figures, () => process.exit(0)),
      (err: Error) => {
        console.error(err.stack ?? err.message);
        process.exit(1);
      },
    );
  });
}
