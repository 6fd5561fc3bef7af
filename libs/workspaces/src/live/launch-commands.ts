import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { DockerHosts, ExecResult } from '@ws/agent';
import { Workspace } from '../workspace.entity';

/**
 * The image's exec_config commands (README "Image launch settings"):
 * - `first_launch.cmd` (with `first_launch.environment`) runs once per container, after it first starts;
 * - `go.cmd` runs each time the workspace is handed to its user: after a fresh start, and when a staged
 *   workspace is assigned (staging calls runGoCommand).
 * Both run as the image's user through `exec` and are waited for. A failing command is reported in the
 * workspace's operational_message; the workspace keeps running.
 */

/**
 * Made atomically (mkdir) by the first run of first_launch inside the container: a provision that runs again
 * after its worker died finds it and does not run the command twice. At most once: a worker killed while the
 * command runs does not run it again.
 */
export const FIRST_LAUNCH_MARKER = '/tmp/.workspace-server-first-launch';
/** The operator's command reaches the shell through the environment: never spliced into our script. */
const COMMAND_VARIABLE = 'WORKSPACE_SERVER_COMMAND';
/** Exit status of the guard when the marker cannot be made (not "already ran"). */
const MARKER_FAILED = 125;
const COMMAND_TIMEOUT_MS = 120_000;
const MESSAGE_OUTPUT_CHARS = 300;

export interface LaunchCommandDeps {
  hosts: DockerHosts;
  workspaces: Repository<Workspace>;
}

type Which = 'first_launch' | 'go';

/** The workspace with what the commands need, loaded when not given. */
async function load(deps: LaunchCommandDeps, workspace: string | Workspace): Promise<Workspace | null> {
  if (typeof workspace !== 'string' && workspace.image && workspace.server && workspace.containerId) return workspace;
  const id = typeof workspace === 'string' ? workspace : workspace.id;
  return deps.workspaces.findOne({ where: { id }, relations: { image: true, server: true } });
}

function failureText(which: Which, result: ExecResult | null, error: unknown): string {
  if (error) return `the ${which} command could not run: ${(error as Error).message}`;
  const r = result as ExecResult;
  if (which === 'first_launch' && r.exitCode === MARKER_FAILED && r.stderr.includes(FIRST_LAUNCH_MARKER)) return `the first_launch command could not record that it ran (${FIRST_LAUNCH_MARKER})`;
  const output = (r.stderr.trim() || r.stdout.trim()).slice(-MESSAGE_OUTPUT_CHARS);
  return `the ${which} command failed (exit code ${r.exitCode})${output ? `: ${output}` : ''}`;
}

async function run(deps: LaunchCommandDeps, workspace: Workspace, which: Which, extraEnvironment: Record<string, string> = {}): Promise<boolean> {
  const execConfig = workspace.image?.execConfig ?? {};
  const command = which === 'first_launch' ? execConfig.first_launch?.cmd : execConfig.go?.cmd;
  if (!command?.trim() || !workspace.server || !workspace.containerId) return true;
  const script = which === 'first_launch'
    ? `if ! mkdir ${FIRST_LAUNCH_MARKER} 2>/dev/null; then [ -d ${FIRST_LAUNCH_MARKER} ] && exit 0; echo "cannot create ${FIRST_LAUNCH_MARKER}" >&2; exit ${MARKER_FAILED}; fi; exec /bin/sh -c "$${COMMAND_VARIABLE}"`
    : `exec /bin/sh -c "$${COMMAND_VARIABLE}"`;
  const environment = { ...(which === 'first_launch' ? execConfig.first_launch?.environment ?? {} : {}), ...extraEnvironment, [COMMAND_VARIABLE]: command };
  let result: ExecResult | null = null;
  let error: unknown = null;
  try {
    result = (await deps.hosts.get(workspace.server).exec(workspace.containerId, { cmd: script, environment, timeoutMs: COMMAND_TIMEOUT_MS })) as ExecResult;
  } catch (err) {
    error = err;
  }
  if (!error && result?.exitCode === 0) return true;
  const text = failureText(which, result, error);
  new Logger('LaunchCommands').warn(`workspace ${workspace.id}: ${text}`);
  // A message on a running workspace, not a state change: the workspace stays running.
  await deps.workspaces
    .update({ id: workspace.id, status: 'running' }, { operationalMessage: `Running; ${text}` })
    .catch((err: Error) => new Logger('LaunchCommands').warn(`workspace ${workspace.id}: could not record the failure: ${err.message}`));
  return false;
}

/**
 * After a fresh container's start (the provision, once the workspace runs): first_launch once, then go when
 * the workspace has its user (a staged one gets go at assignment instead). Never throws.
 */
export async function runStartCommands(deps: LaunchCommandDeps, workspace: string | Workspace): Promise<void> {
  if (typeof workspace !== 'string' && workspace.image && !hasCommands(workspace)) return; // the common case: no query
  const loaded = await load(deps, workspace).catch(() => null);
  if (!loaded || !hasCommands(loaded)) return;
  // go after a failed first_launch would act on a half-prepared desktop and hide the first failure.
  // A staged workspace runs go at its assignment (staging), even when a claim lands before this line.
  if ((await run(deps, loaded, 'first_launch')) && loaded.userId && !loaded.stagingConfigId) await run(deps, loaded, 'go');
}

/**
 * Each time the workspace is handed to its user (staging calls this at assignment, with the request's
 * WORKSPACE_URL in `environment`: the container started before the request). Never throws.
 */
export async function runGoCommand(deps: LaunchCommandDeps, workspace: string | Workspace, environment: Record<string, string> = {}): Promise<void> {
  const loaded = await load(deps, workspace).catch(() => null);
  if (loaded) await run(deps, loaded, 'go', environment);
}

function hasCommands(workspace: Workspace): boolean {
  const config = workspace.image?.execConfig ?? {};
  return !!(config.first_launch?.cmd?.trim() || config.go?.cmd?.trim());
}

/** The same, injectable (for services that do not hold the Docker hosts and the repository themselves). */
@Injectable()
export class LaunchCommands {
  private readonly deps: LaunchCommandDeps;

  constructor(hosts: DockerHosts, @InjectRepository(Workspace) workspaces: Repository<Workspace>) {
    this.deps = { hosts, workspaces };
  }

  runStartCommands(workspace: string | Workspace): Promise<void> {
    return runStartCommands(this.deps, workspace);
  }

  runGoCommand(workspace: string | Workspace, environment: Record<string, string> = {}): Promise<void> {
    return runGoCommand(this.deps, workspace, environment);
  }
}
