/** Process helpers shared by the benchmarks: free loopback ports and CPU time read from /proc. */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export /** CPU time (user + system, ms) of a process and all its descendants, from /proc. */
function treeCpuMs(rootPid: number): number {
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
