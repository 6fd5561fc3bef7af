import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Not, Repository } from 'typeorm';
import { AgentError, ContainerNotFoundError, ContainerPathNotFoundError, containerNameFor, DockerHost } from '@ws/agent';
import { ApiError, AppConfig, ErrorCode, toWireId } from '@ws/common';
import type { EffectiveGroupSettings } from '@ws/groups';
import type { Image } from '@ws/images';
import { InvalidProfilePathError, mib, ProfileSync, resolveProfileLocation } from '@ws/profiles';
import { PermanentFailure } from '@ws/queue';
import type { User } from '@ws/users';
import { PROFILE_LOCATION_INDEX, Workspace } from '../workspace.entity';
import { WorkspaceLifecycle } from '../lifecycle/workspace-lifecycle.service';

/** A profile store that failed while loading (not Docker): the provision retries it like a Docker hiccup. */
export class ProfileStoreError extends Error {}

/** A clean absolute directory path, safe to name in a shell command and a Docker archive call. */
const DIRECTORY = /^(\/[A-Za-z0-9._@+-]+)+$/;

/**
 * Persistent profiles as workspaces use them: the launch's decision (setting, location, exclusivity), the load
 * into a created container before it starts, and the save before a container is removed. The storage side
 * (generations, pointer, verification) is ProfileSync's (libs/profiles).
 */
@Injectable()
export class WorkspaceProfiles {
  private readonly logger = new Logger(WorkspaceProfiles.name);

  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly profiles: ProfileSync,
    private readonly lifecycle: WorkspaceLifecycle,
    private readonly config: AppConfig,
  ) {}

  /**
   * The launch step: the profile location this workspace uses (modes Enabled and Reset on an image with a
   * persistent_profile_path), or null (Disabled, no mode, no path: nothing is loaded or saved). Refuses
   * without allow_persistent_profile (403), a path that names no store (400) and a location that a live
   * workspace still uses (409; the unique index decides a race the same way, see conflictOf).
   */
  async decide(input: { user: User; image: Image; settings: EffectiveGroupSettings; mode: string | undefined }): Promise<string | null> {
    const { user, image, settings, mode } = input;
    if (!image.persistentProfilePath || mode === undefined || mode === 'Disabled') return null;
    if (!settings.clientSettings.allow_persistent_profile) {
      throw new ApiError(ErrorCode.Forbidden, `Persistent profiles are not allowed for this user (client setting allow_persistent_profile); persistent_profile_mode ${mode} needs it`);
    }
    let location: string;
    try {
      location = resolveProfileLocation(image.persistentProfilePath, { username: user.username, userId: user.id, imageId: image.id });
    } catch (err) {
      if (err instanceof InvalidProfilePathError) throw new ApiError(ErrorCode.InvalidRequest, `Image (${toWireId(image.id)}) has an unusable persistent_profile_path: ${err.message}`);
      throw err;
    }
    const holder = await this.workspaces.findOne({ where: { profileLocation: location, status: Not('deleted') }, select: { id: true } });
    if (holder) throw profileInUse(holder.id);
    return location;
  }

  /** The 409 for a unique violation of the live-profile index (two launches raced past decide), else null. */
  conflictOf(err: unknown): ApiError | null {
    const driver = (err as { driverError?: { code?: string; constraint?: string } }).driverError ?? (err as { code?: string; constraint?: string });
    return driver?.code === '23505' && driver.constraint === PROFILE_LOCATION_INDEX ? profileInUse(null) : null;
  }

  /**
   * Provision, after the container is created and before it starts: Reset deletes the saved profile, Enabled
   * streams it into the container (none saved yet: the image's home stays). Then the workspace is `ready`, the
   * only state a removal saves from. Safe to repeat on a created-not-started container.
   */
  async prepare(workspace: Workspace, image: Image, host: DockerHost, containerId: string): Promise<void> {
    const location = workspace.profileLocation;
    if (!location) return;
    const loading = workspace.persistentProfileMode === 'Reset' ? 'Resetting the persistent profile' : 'Loading the persistent profile';
    await this.lifecycle.progress(workspace.id, 30, loading, { containerId });
    try {
      if (workspace.persistentProfileMode === 'Reset') await this.profiles.reset(location);
      else {
        const directory = await this.directoryOf(image, host);
        const report = this.reporter((percent, message) => this.lifecycle.progress(workspace.id, percent, message));
        await this.profiles.restore(location, { host, containerId, directory }, (bytes, total) =>
          report(30 + Math.min(9, Math.floor((bytes / Math.max(1, total)) * 10)), `${loading}: ${mib(bytes)} of ${mib(total)} MiB`));
      }
    } catch (err) {
      if (err instanceof AgentError || err instanceof PermanentFailure) throw err;
      throw new ProfileStoreError(`${loading} failed: ${(err as Error).message}`);
    }
    await this.lifecycle.progress(workspace.id, 39, `${loading}: done`, { profileState: 'ready' });
  }

  /**
   * Destroy, before the container is removed: a workspace whose profile is `ready` has its container stopped
   * and its profile saved (progress in its status). Answers a note for the removed workspace's message when the
   * profile was not saved (too large, container gone); throws when the store failed (the job retries, the
   * container is kept, the previous profile stays current).
   */
  async saveBeforeRemoval(workspace: Workspace, image: Image | undefined, host: DockerHost): Promise<string | undefined> {
    const location = workspace.profileLocation;
    if (!location) return undefined;
    if (workspace.profileState === 'not_saved') return workspace.operationalMessage; // decided by an earlier run
    if (workspace.profileState !== 'ready' || !image) return undefined;
    const containerId = workspace.containerId ?? containerNameFor(workspace.id);
    const gone = async (err: unknown) => {
      const note = err instanceof ContainerPathNotFoundError
        ? `The profile directory ${err.path} does not exist in the workspace container; the persistent profile was not saved and the previous profile is kept`
        : 'The workspace container was gone; the persistent profile was not saved and the previous profile is kept';
      await this.lifecycle.stoppingProgress(workspace.id, 0, note, { profileState: 'not_saved' });
      return note;
    };
    let estimate: number | null;
    let directory: string;
    try {
      directory = await this.directoryOf(image, host);
      estimate = (await this.measure(host, containerId, directory)) ?? (await this.profiles.savedSize(location));
      await this.lifecycle.stoppingProgress(workspace.id, 1, 'Stopping the workspace to save its persistent profile');
      await host.stop(containerId);
    } catch (err) {
      if (err instanceof ContainerNotFoundError) return gone(err);
      throw err;
    }
    const report = this.reporter((percent, message) => this.lifecycle.stoppingProgress(workspace.id, percent, message));
    const saving = (bytes: number) =>
      report(estimate ? Math.min(95, 5 + Math.floor((bytes / estimate) * 90)) : 5, `Saving the persistent profile: ${mib(bytes)}${estimate ? ` of ~${mib(estimate)}` : ''} MiB`);
    saving(0);
    let outcome;
    try {
      outcome = await this.profiles.save(location, { host, containerId, directory }, workspace.id, saving);
    } catch (err) {
      if (err instanceof ContainerNotFoundError || err instanceof ContainerPathNotFoundError) return gone(err);
      const message = `Saving the persistent profile failed (${(err as Error).message}); retrying (the previous profile is kept)`;
      await this.lifecycle.stoppingProgress(workspace.id, 5, message);
      this.logger.warn(`workspace ${workspace.id}: ${message}`);
      throw err;
    }
    if (!outcome.saved) {
      const size = estimate && estimate > outcome.maxBytes ? `${mib(estimate)} MiB` : `over ${mib(outcome.maxBytes)} MiB`;
      const note = `The persistent profile (${size}) exceeds PROFILE_MAX_MB (${this.config.PROFILE_MAX_MB} MiB) and was not saved; the previous profile is kept`;
      await this.lifecycle.stoppingProgress(workspace.id, 95, note, { profileState: 'not_saved' });
      return note;
    }
    await this.lifecycle.stoppingProgress(workspace.id, 95, `Saved the persistent profile (${mib(outcome.size)} MiB); removing the workspace`, { profileState: 'saved' });
    return undefined;
  }

  /**
   * The profile directory: the image's persistent_profile_config.path, else the image's HOME, else
   * /home/<container user or "workspace">.
   */
  async directoryOf(image: Image, host: DockerHost): Promise<string> {
    const configured = image.persistentProfileConfig?.path;
    const candidates: unknown[] = [configured];
    if (!configured) {
      const { user, env } = await host.imageConfig(image.name);
      candidates.push(env.HOME, `/home/${image.containerUser || (user && !/^\d/.test(user) ? user.split(':')[0] : 'workspace')}`);
    }
    const directory = candidates.find((c): c is string => typeof c === 'string' && c !== '');
    if (!directory || !DIRECTORY.test(directory) || directory.split('/').some((s) => s === '.' || s === '..')) {
      throw new PermanentFailure(`Image ${image.name}: the persistent profile directory ${JSON.stringify(directory)} must be a clean absolute path (persistent_profile_config.path)`);
    }
    return directory;
  }

  /** The profile directory's size while the container still runs (du), or null when it cannot tell. */
  private async measure(host: DockerHost, containerId: string, directory: string): Promise<number | null> {
    try {
      const state = await host.inspect(containerId);
      if (!state.running) return null;
      const result = await host.exec(containerId, { cmd: `du -sb -- '${directory}' 2>/dev/null | cut -f1`, timeoutMs: 30_000 });
      const bytes = Number(result.stdout.trim());
      return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : null;
    } catch (err) {
      if (err instanceof ContainerNotFoundError) throw err;
      return null;
    }
  }

  /** Progress writes that never pile up: one at a time, later reports while one is in flight are dropped. */
  private reporter(write: (percent: number, message: string) => Promise<void>): (percent: number, message: string) => void {
    let busy = false;
    return (percent, message) => {
      if (busy) return;
      busy = true;
      write(percent, message).catch((err: Error) => this.logger.warn(`progress not recorded: ${err.message}`)).finally(() => (busy = false));
    };
  }
}

function profileInUse(workspaceId: string | null): ApiError {
  const which = workspaceId ? `Workspace (${toWireId(workspaceId)})` : 'Another workspace';
  return new ApiError(ErrorCode.Conflict, `${which} is still using or saving this persistent profile; destroy it and wait until get_workspace_status reports it removed`);
}
