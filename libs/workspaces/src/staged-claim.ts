import { Injectable } from '@nestjs/common';
import type { EffectiveGroupSettings } from '@ws/groups';
import type { Image } from '@ws/images';
import type { User } from '@ws/users';
import type { RequestWorkspaceRequest } from './dto/workspace.requests';

/** What a launch knows when it may take a staged workspace instead of starting one. */
export interface StagedClaimInput {
  user: User;
  image: Image;
  settings: EffectiveGroupSettings;
  request: RequestWorkspaceRequest;
}

/** A staged workspace now the user's: running, with a session token minted for it. */
export interface StagedClaimResult {
  workspaceId: string;
  shareId: string;
  jwt: string;
}

export type StagedClaimer = (input: StagedClaimInput) => Promise<StagedClaimResult | null>;

/**
 * The launch's claim step, filled by the staging area (which depends on workspaces, not the other way
 * round): null when nothing is registered or nothing matched, and the launch starts a fresh workspace.
 */
@Injectable()
export class StagedClaimSlot {
  private claimer: StagedClaimer | null = null;

  register(claimer: StagedClaimer): void {
    if (this.claimer) throw new Error('A staged-workspace claimer is registered already');
    this.claimer = claimer;
  }

  claim(input: StagedClaimInput): Promise<StagedClaimResult | null> {
    return this.claimer ? this.claimer(input) : Promise.resolve(null);
  }
}
