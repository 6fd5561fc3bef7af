/** Helpers shared by the benchmarks: loopback ports, bounded waits, the public API, CPU time read from /proc. */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Polls `check` every 100 ms until it answers a value (errors count as not yet), for at most `timeoutMs`. */
export async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Calls a public API operation and answers its JSON body, whatever the status. */
export async function post(base: string, op: string, body: object): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}/api/public/${op}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return (await res.json()) as Record<string, unknown>;
}

/** Resolves once something listens on the loopback port. */
export async function listening(port: number): Promise<void> {
  await until(`a listener on ${port}`, () => new Promise<true | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true)).listen(port, '127.0.0.1', () => probe.close(() => resolve(undefined)));
  }));
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system, ms) of a process and all its descendants, from /proc. */
export function treeCpuMs(rootPid: number): number {
  const TICK_MS = 10; // USER_HZ is 100 on Linux
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the command (which may contain spaces) start at ") ": state ppid ... utime(14) stime(15).
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(entry), Number(fields[1]));
      ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]));
    } catch {
      // the process ended while we looked
    }
  }
  let total = 0;
  for (const [pid, t] of ticks) {
    for (let p: number | undefined = pid, depth = 0; p !== undefined && p > 1 && depth < 64; p = parent.get(p), depth++) {
      if (p === rootPid) {
        total += t;
        break;
      }
    }
  }
  return total * TICK_MS;
}
