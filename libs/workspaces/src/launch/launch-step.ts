import { SetMetadata } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { IssuedLaunch, ResolvedLaunch } from './launch-context';
import type { Workspace } from '../workspace.entity';

export const LAUNCH_STEP_KEY = 'ws:launch-step';

/**
 * Where each step runs, after the user, settings and image are resolved and before the workspace is recorded.
 * A new step takes a number between its neighbours.
 */
export const LaunchOrder = {
  Limits: 100,
  ServerConnection: 200,
  PersistentProfile: 300,
  Egress: 400,
  ClaimStaged: 500,
} as const;

/**
 * What a step's reservation adds to the recorded workspace row: launch options (egress: the gateway the container
 * joins), a server session's columns (server connection: the connection, its password sealed to the workspace id,
 * a relay's key). The recorder writes them and knows nothing of how they were made.
 */
export interface ReservedRowFields {
  launchOptions?: Pick<Workspace['launchOptions'], 'egressGatewayId'>;
  serverSession?: Pick<Workspace, 'serverConnection' | 'serverPasswordEncrypted' | 'relaySecret'>;
  profile?: Pick<Workspace, 'persistentProfileMode' | 'isPersistentProfile' | 'profileLocation'>;
}

/**
 * One step of every launch (request_workspace, a cast launch), contributed by the library that owns its concern:
 * `run` checks or decides before anything is recorded (and may serve the request itself by setting
 * `launch.answer`); what it returns (`Checked`) is handed to the same step's `reserve`, which, inside the
 * transaction that records the workspace, holds what the step checked (after the license seat and the server,
 * in step order). Steps share nothing else: what the row needs comes back as ReservedRowFields.
 */
export interface LaunchStep<Checked = unknown> {
  readonly name: string;
  readonly order: number;
  run?(launch: ResolvedLaunch): Promise<Checked>;
  reserve?(tx: EntityManager, launch: IssuedLaunch, checked: Checked): Promise<ReservedRowFields>;
}

/** Marks a provider (a LaunchStep) of any module as a step of every launch: the pipeline finds it and runs it at its order. */
export const LaunchStepProvider = () => SetMetadata(LAUNCH_STEP_KEY, true);
