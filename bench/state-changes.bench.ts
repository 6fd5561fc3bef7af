/**
 * Issue 24 benchmark: state changes per second with 1 and 4 concurrent writers, each change one transaction that
 * updates its own row and, "with events", appends its lifecycle event to the outbox (appendWorkspaceEvents, as
 * WorkspaceLifecycle does). Printed as ratios to "without events" measured in the same run, and once more as
 * the outbox wrote before issue 24: under a deployment-wide advisory lock, with a notice at each commit.
 * No relay runs: this measures the writers' hot path, not delivery.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { cpus } from 'node:os';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '@ws/database';
import { appendWorkspaceEvents } from '@ws/workspaces';
import { benchDeployment } from './harness';
import { median } from './stats';

const SECONDS = Number(process.env.BENCH_STATE_SECONDS ?? 1.5);
/** Each figure is the median of this many measurements, the modes interleaved (a shared machine drifts). */
const ROUNDS = Number(process.env.BENCH_STATE_ROUNDS ?? 5);
/** Bound of one writer's changes in one measurement, whatever the time. */
const MAX_CHANGES = 20_000;
/** The outbox's advisory lock key before issue 24 ("ws_e"), for the before/after line. */
const OLD_OUTBOX_LOCK_KEY = 0x77735f65;

type Mode = 'without events' | 'with events' | 'with events as before issue 24';

async function measure(db: DataSource, writers: number, mode: Mode): Promise<number> {
  const ids = Array.from({ length: writers }, () => randomUUID());
  await db.query('INSERT INTO bench_state_rows (id, n) SELECT unnest($1::uuid[]), 0', [ids]);
  const deadline = performance.now() + SECONDS * 1000;
  const start = performance.now();
  const counts = await Promise.all(ids.map(async (id) => {
    let n = 0;
    while (n < MAX_CHANGES && performance.now() < deadline) {
      await db.transaction(async (tx) => {
        await tx.query('UPDATE bench_state_rows SET n = n + 1, changed_at = now() WHERE id = $1', [id]);
        if (mode === 'without events') return;
        if (mode === 'with events as before issue 24') await tx.query('SELECT pg_advisory_xact_lock($1)', [OLD_OUTBOX_LOCK_KEY]);
        await appendWorkspaceEvents(tx, id, [{ type: 'running', payload: { status: 'running', n } }]);
        // Before issue 24 a trigger also notified the relay at each commit (PostgreSQL serialises notifying commits).
        if (mode === 'with events as before issue 24') await tx.query(`SELECT pg_notify('workspace_event', '')`);
      });
      n++;
    }
    return n;
  }));
  const seconds = (performance.now() - start) / 1000;
  return counts.reduce((a, b) => a + b, 0) / seconds;
}

async function main(): Promise<void> {
  const deployment = await benchDeployment('statechanges');
  try {
    const db = new DataSource({ ...dataSourceOptions(deployment.config, deployment.settings.DATABASE_NAME), poolSize: 8 } as ConstructorParameters<typeof DataSource>[0]);
    await db.initialize();
    try {
      await db.query('CREATE TABLE bench_state_rows (id uuid PRIMARY KEY, n integer NOT NULL, changed_at timestamptz)');
      console.log(`state changes per second (median of ${ROUNDS} interleaved ${SECONDS} s runs; one transaction per change; ${cpus().length} cores)`);
      for (const writers of [1, 4]) {
        const modes: Mode[] = ['without events', 'with events', 'with events as before issue 24'];
        const rates = new Map<Mode, number[]>(modes.map((m) => [m, []]));
        for (let r = 0; r < ROUNDS; r++) for (const mode of r % 2 ? [...modes].reverse() : modes) rates.get(mode)!.push(await measure(db, writers, mode));
        const [without, withEvents, before] = modes.map((m) => median(rates.get(m)!));
        console.log(
          `  ${writers} writer${writers > 1 ? 's' : ' '}: without events ${without.toFixed(0).padStart(6)}/s   with events ${withEvents.toFixed(0).padStart(6)}/s (×${(withEvents / without).toFixed(2)})` +
            `   before issue 24 (global lock, notice) ${before.toFixed(0).padStart(6)}/s (×${(before / without).toFixed(2)})`,
        );
      }
    } finally {
      await db.destroy();
    }
  } finally {
    await deployment.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
