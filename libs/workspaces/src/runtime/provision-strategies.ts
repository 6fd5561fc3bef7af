import { Injectable } from '@nestjs/common';
import { DiscoveryService, Reflector } from '@nestjs/core';
import { PermanentFailure } from '@ws/queue';
import { toWireId } from '@ws/common';
import { markedProviders } from '../marked-providers';
import type { Workspace } from '../workspace.entity';
import { PROVISION_STRATEGY_KEY, ProvisionStrategy } from './provision-strategy';

/** Every module's provision strategies (@ProvisionStrategyProvider); read once, on the first provision. */
@Injectable()
export class ProvisionStrategies {
  private found: readonly ProvisionStrategy[] | null = null;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly reflector: Reflector,
  ) {}

  list(): readonly ProvisionStrategy[] {
    this.found ??= markedProviders<ProvisionStrategy>(this.discovery, this.reflector, PROVISION_STRATEGY_KEY);
    return this.found;
  }

  /** The one strategy that handles the workspace; none or two is a module left out or registered twice (the workspace fails). */
  for(workspace: Workspace): ProvisionStrategy {
    return strategyFor(this.list(), workspace);
  }
}

export function strategyFor(strategies: readonly ProvisionStrategy[], workspace: Workspace): ProvisionStrategy {
  const matches = strategies.filter((s) => s.handles(workspace));
  if (matches.length === 1) return matches[0];
  const kind = workspace.serverConnection ? `a ${workspace.serverConnection.mode} server session` : 'a container';
  throw new PermanentFailure(matches.length === 0
    ? `no provision strategy handles workspace ${toWireId(workspace.id)} (${kind}): is its module loaded in the worker?`
    : `provision strategies ${matches.map((s) => s.name).join(', ')} all handle workspace ${toWireId(workspace.id)} (${kind})`);
}
