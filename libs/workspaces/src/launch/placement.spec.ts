import { ApiError } from '@ws/common';
import { checkCapacitySettings } from '@ws/servers';
import type { Image } from '@ws/images';
import type { Server } from '@ws/servers';
import { byRoom, isEligible, isUp, LOCK_WAIT_SLICE_MAX_MS, LOCK_WAIT_SLICE_MS, LOCK_WAIT_SLICES, lockWaitSliceMs, offeredCores, offeredMemory, placementPredicates } from './placement';

describe('server capacity settings', () => {
  it('placement offers cores and memory times the overcommit factors', () => {
    expect(offeredCores({ cores: 2, cpuOvercommit: 4 })).toBe(8);
    expect(offeredMemory({ memory: 24 * 1024 ** 3, memoryOvercommit: 1 })).toBe(24 * 1024 ** 3);
    expect(offeredMemory({ memory: 1000, memoryOvercommit: 1.5 })).toBe(1500);
    // The reference desktop (1 core, 1 GiB) on a 2-core, 24 GiB host with the defaults: 8 at once.
    expect(Math.min(offeredCores({ cores: 2, cpuOvercommit: 4 }) / 1, offeredMemory({ memory: 24 * 1024 ** 3, memoryOvercommit: 1 }) / 1024 ** 3)).toBe(8);
  });

  it('refuses factors outside (0, 64] and methods other than Quotas or Shares, with 400', () => {
    for (const changes of [{ cpuOvercommit: 0 }, { cpuOvercommit: -1 }, { memoryOvercommit: 65 }, { cpuOvercommit: Number.NaN }, { cpuAllocationMethod: 'Inherit' }, { cores: 0 }, { memory: 1.5 }]) {
      expect(() => checkCapacitySettings(changes)).toThrow(ApiError);
    }
    expect(() => checkCapacitySettings({ cpuOvercommit: 64, memoryOvercommit: 0.5, cpuAllocationMethod: 'Shares', cores: 0.5, memory: 1024 })).not.toThrow();
    expect(() => checkCapacitySettings({})).not.toThrow();
  });
});

describe('placement eligibility', () => {
  const server = (fields: Partial<Server>) => ({ id: 's1', enabled: true, zoneId: 'z1', health: 'up', ...fields }) as Server;
  const image = (fields: Partial<Image>) => ({ restrictToZone: false, zoneId: null, restrictToServer: false, serverId: null, ...fields }) as Image;

  it('is every predicate: enabled, the image\'s zone or server when restricted, the caller\'s zone', () => {
    expect(placementPredicates.length).toBeGreaterThanOrEqual(4);
    expect(isEligible(server({}), image({}), {})).toBe(true);
    expect(isEligible(server({ enabled: false }), image({}), {})).toBe(false);
    expect(isEligible(server({}), image({ restrictToZone: true, zoneId: 'z2' }), {})).toBe(false);
    expect(isEligible(server({}), image({ restrictToServer: true, serverId: 's2' }), {})).toBe(false);
    expect(isEligible(server({}), image({ restrictToServer: true, serverId: 's1' }), {})).toBe(true);
    expect(isEligible(server({}), image({}), { zoneId: 'z2' })).toBe(false);
  });

  it('a server marked down is eligible but not up: it keeps its workspaces and gets no new one', () => {
    expect(isEligible(server({ health: 'down' }), image({}), {})).toBe(true);
    expect(isUp(server({ health: 'down' }))).toBe(false);
  });
});

describe('placement order', () => {
  const server = (id: string) => ({ id }) as Server;
  const room = (cores: number, memory = 1024) => ({ cores, memory });

  it('takes the most free cores, then memory, first', () => {
    const order = byRoom([{ server: server('a'), room: room(2) }, { server: server('b'), room: room(4) }, { server: server('c'), room: room(4, 2048) }], 0);
    expect(order.map((s) => s.id)).toEqual(['c', 'b', 'a']);
  });

  it('deals servers with the same room out in turn by ticket, so launches that read the same allocation split evenly', () => {
    const tied = [{ server: server('b'), room: room(4) }, { server: server('a'), room: room(4) }, { server: server('z'), room: room(1) }];
    const firsts = Array.from({ length: 16 }, (_, ticket) => byRoom(tied, ticket)[0].id);
    expect(firsts.filter((id) => id === 'a')).toHaveLength(8);
    expect(firsts.filter((id) => id === 'b')).toHaveLength(8);
    expect(byRoom(tied, 7).map((s) => s.id)).toEqual(['b', 'a', 'z']);
  });

  it('waits for a held row in short slices, then in longer ones up to the cap (a long queue rebalances without spinning)', () => {
    expect(lockWaitSliceMs(0)).toBe(LOCK_WAIT_SLICE_MS);
    expect(lockWaitSliceMs(LOCK_WAIT_SLICES - 1)).toBe(LOCK_WAIT_SLICE_MS);
    expect(lockWaitSliceMs(LOCK_WAIT_SLICES)).toBe(2 * LOCK_WAIT_SLICE_MS);
    expect(lockWaitSliceMs(LOCK_WAIT_SLICES + 1)).toBe(4 * LOCK_WAIT_SLICE_MS);
    expect(lockWaitSliceMs(LOCK_WAIT_SLICES + 100)).toBe(LOCK_WAIT_SLICE_MAX_MS);
  });
});
