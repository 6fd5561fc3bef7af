import { Injectable } from '@nestjs/common';
import { DiscoveryService, Reflector } from '@nestjs/core';
import { markedProviders } from '../marked-providers';
import { LAUNCH_STEP_KEY, LaunchStep } from './launch-step';

/** Every module's launch steps (@LaunchStepProvider), in their order; read once, on the first launch. */
@Injectable()
export class LaunchSteps {
  private found: readonly LaunchStep[] | null = null;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly reflector: Reflector,
  ) {}

  list(): readonly LaunchStep[] {
    this.found ??= orderedSteps(markedProviders<LaunchStep>(this.discovery, this.reflector, LAUNCH_STEP_KEY));
    return this.found;
  }
}

/** The steps by order; two at one place, or one twice, is a bug in a module's registration. */
export function orderedSteps(steps: LaunchStep[]): LaunchStep[] {
  const sorted = [...new Set(steps)].sort((a, b) => a.order - b.order);
  sorted.forEach((step, i) => {
    if (i > 0 && sorted[i - 1].order === step.order) throw new Error(`launch steps ${sorted[i - 1].name} and ${step.name} share the order ${step.order}`);
  });
  return sorted;
}
