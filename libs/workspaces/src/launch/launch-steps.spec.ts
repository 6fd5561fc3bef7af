import type { LaunchStep } from './launch-step';
import { LaunchOrder } from './launch-step';
import { orderedSteps } from './launch-steps';

const step = (name: string, order: number): LaunchStep => ({ name, order, run: async () => undefined });

describe('launch steps', () => {
  it('run in their declared order, whichever module registered them first', () => {
    const claim = step('claim staged', LaunchOrder.ClaimStaged);
    const limits = step('limits', LaunchOrder.Limits);
    const egress = step('egress', LaunchOrder.Egress);
    expect(orderedSteps([claim, egress, limits]).map((s) => s.name)).toEqual(['limits', 'egress', 'claim staged']);
  });

  it('refuse two steps at one place, and count a step found twice once', () => {
    const limits = step('limits', LaunchOrder.Limits);
    expect(() => orderedSteps([limits, step('other', LaunchOrder.Limits)])).toThrow('launch steps limits and other share the order 100');
    expect(orderedSteps([limits, limits])).toEqual([limits]);
  });
});
