import { SetMetadata } from '@nestjs/common';
import type { DockerHost } from '@ws/agent';
import type { Image } from '@ws/images';
import type { Server } from '@ws/servers';
import type { Workspace } from '../workspace.entity';

export const PROVISION_STRATEGY_KEY = 'ws:provision-strategy';

/** One run of the provision job: `final` when no retry follows; `signal` aborts when the worker hands the job back. */
export interface ProvisionAttempt {
  final: boolean;
  signal?: AbortSignal;
}

/** Where a workspace that runs on a Docker host is made: its image, its server and that server's driver. */
export interface ProvisionTarget {
  image: Image;
  server: Server;
  host: DockerHost;
}

interface StrategyBase {
  readonly name: string;
  /** Whether this strategy makes this workspace; exactly one strategy handles each workspace. */
  handles(workspace: Workspace): boolean;
  /** Whether an error `provision` threw fails the workspace now (no retry helps); else the job retries. */
  isPermanent(err: unknown): boolean;
}

/**
 * A kind of workspace that runs a container on its Docker host (a desktop, a bridge or relay): WorkspaceRuntime
 * fails a workspace without image or server before asking, and removes the container (by name) after a failure.
 */
export interface HostedProvisionStrategy extends StrategyBase {
  readonly onDockerHost: true;
  provision(workspace: Workspace, target: ProvisionTarget, attempt: ProvisionAttempt): Promise<void>;
}

/** A kind of workspace with nothing on a Docker host (a VNC server reached directly): nothing to remove after a failure. */
export interface HostlessProvisionStrategy extends StrategyBase {
  readonly onDockerHost: false;
  provision(workspace: Workspace, attempt: ProvisionAttempt): Promise<void>;
}

/**
 * The kind-specific part of the provision job: make the workspace `running` (WorkspaceLifecycle.running) or throw.
 * WorkspaceRuntime keeps the rest: loading the row, the retry or failure of an attempt and its message.
 */
export type ProvisionStrategy = HostedProvisionStrategy | HostlessProvisionStrategy;

/** Marks a provider (a ProvisionStrategy) of any module as a way to provision workspaces: WorkspaceRuntime finds it. */
export const ProvisionStrategyProvider = () => SetMetadata(PROVISION_STRATEGY_KEY, true);
