import type { JobProducer } from './job-producer';
import { QUEUES } from './jobs';

/** The job states whose counts the metrics show. */
export const DEPTH_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

/** Jobs in each queue by state: one round of counts per queue (a few Redis commands each). */
export async function queueDepths(producer: JobProducer): Promise<Array<{ queue: string; state: string; count: number }>> {
  const out: Array<{ queue: string; state: string; count: number }> = [];
  for (const queue of Object.values(QUEUES)) {
    const counts = await producer.queue(queue).getJobCounts(...DEPTH_STATES);
    for (const state of DEPTH_STATES) out.push({ queue, state, count: counts[state] ?? 0 });
  }
  return out;
}
