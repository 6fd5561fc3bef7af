import type { EntityManager } from 'typeorm';
import type { AppConfig } from '@ws/common';
import type { JobProducer } from '@ws/queue';
import type { WorkspaceEventMessage } from '@ws/workspaces';
import { StagingReplenisher } from './staging-replenisher';

describe('staging refill', () => {
  const enqueued: Array<{ payload: unknown; options: unknown }> = [];
  const jobs = { enqueue: async (_name: string, payload: unknown, options: unknown) => void enqueued.push({ payload, options }) } as unknown as JobProducer;
  const replenisher = new StagingReplenisher(jobs, { STAGING_REFILL_DELAY_MS: 1000 } as AppConfig);
  const row = (assignedAt: Date | null) => ({ query: async () => [{ staging_config_id: 'config-1', assigned_at: assignedAt }] }) as unknown as EntityManager;
  const event = (type: string) => ({ type, workspaceId: 'w1' }) as unknown as WorkspaceEventMessage;

  beforeEach(() => void enqueued.splice(0));

  it('refills after STAGING_REFILL_DELAY_MS when a desktop is handed out, so its boot does not meet the claimant\'s first picture', async () => {
    await replenisher.replenish(event('assigned'), row(new Date()));
    expect(enqueued).toEqual([{ payload: { stagingConfigId: 'config-1' }, options: { delay: 1000 } }]);
  });

  it('refills at once when an unassigned desktop failed or went, and not at all for a handed-out one\'s end', async () => {
    await replenisher.replenish(event('failed'), row(null));
    await replenisher.replenish(event('destroyed'), row(null));
    await replenisher.replenish(event('destroyed'), row(new Date()));
    expect(enqueued).toEqual([{ payload: { stagingConfigId: 'config-1' }, options: {} }, { payload: { stagingConfigId: 'config-1' }, options: {} }]);
  });

  it('with a delay of 0, refills at once after a claim too', async () => {
    await new StagingReplenisher(jobs, { STAGING_REFILL_DELAY_MS: 0 } as AppConfig).replenish(event('assigned'), row(new Date()));
    expect(enqueued).toEqual([{ payload: { stagingConfigId: 'config-1' }, options: {} }]);
  });
});
