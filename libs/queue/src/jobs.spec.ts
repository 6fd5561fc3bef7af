import { JOB_QUEUE, jobOptions, JOBS, QUEUES, SCHEDULED_JOBS } from './jobs';

describe('the job policy table', () => {
  it('puts every job on a known queue, with at least one attempt', () => {
    for (const [name, policy] of Object.entries(JOBS)) {
      expect({ name, queue: Object.values(QUEUES).includes(policy.queue), attempts: policy.attempts >= 1 }).toEqual({ name, queue: true, attempts: true });
      expect(JOB_QUEUE[name as keyof typeof JOBS]).toBe(policy.queue);
    }
  });

  it('schedules exactly the jobs that declare a repeat interval', () => {
    expect(new Set(SCHEDULED_JOBS)).toEqual(new Set(Object.entries(JOBS).filter(([, p]) => p.everyMs !== undefined).map(([n]) => n)));
    expect(SCHEDULED_JOBS).toContain('workspace-events.relay');
    expect(SCHEDULED_JOBS).not.toContain('workspace.provision');
    // The host health check's period is the operator's (SERVER_HEALTH_INTERVAL_MS), about 10 s by default.
    expect(JOBS['maintenance.check-server-health']).toEqual(expect.objectContaining({ queue: QUEUES.maintenance, everyMs: 10_000, everyMsSetting: 'SERVER_HEALTH_INTERVAL_MS' }));
  });

  it('turns a policy into BullMQ options: attempts, exponential backoff, bounded retention', () => {
    expect(jobOptions('workspace.provision')).toEqual({
      attempts: 8, backoff: { type: 'exponential', delay: 500 }, removeOnComplete: { age: 3600, count: 1000 }, removeOnFail: { age: 7 * 24 * 3600 },
    });
    expect(jobOptions('maintenance.reconcile-containers').attempts).toBe(1);
  });
});
