import { ApiError } from '@ws/common';
import { checkCapacitySettings } from '@ws/servers';
import { offeredCores, offeredMemory } from './placement';

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
