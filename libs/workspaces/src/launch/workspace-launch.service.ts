import { Injectable } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { ApiError, ErrorCode, toWireId } from '@ws/common';
import { ImagesService } from '@ws/images';
import { User, UsersService } from '@ws/users';
import type { RequestWorkspaceRequest } from '../dto/workspace.requests';
import { WorkspaceSettings } from '../reads/workspace-settings.service';
import { LaunchAnswer, LaunchRequest, launchRequestOf, ResolvedLaunch } from './launch-context';
import { LaunchRecorder } from './launch-recorder.service';
import { LaunchSteps } from './launch-steps';

const FOREIGN_KEY_VIOLATION = '23503';

/**
 * request_workspace and a cast launch: resolve the user (or make an anonymous one), their effective settings and
 * the image; run every module's launch steps in order (LaunchSteps: limits, server connection, persistent
 * profile, egress, claim staged, …), any of which may refuse or serve the request; then record it
 * (LaunchRecorder: token, workspace row with each step's reservation, provision job). Slow work (the container)
 * is the worker's.
 */
@Injectable()
export class WorkspaceLaunch {
  constructor(
    private readonly users: UsersService,
    private readonly images: ImagesService,
    private readonly settings: WorkspaceSettings,
    private readonly steps: LaunchSteps,
    private readonly recorder: LaunchRecorder,
  ) {}

  /** request_workspace: the body's user_id is loaded (an unknown or inactive one is refused), or the launch makes an anonymous user. */
  async request(body: RequestWorkspaceRequest): Promise<LaunchAnswer> {
    const user = body.user_id !== undefined ? await this.users.findActive(body.user_id) : 'anonymous';
    return this.launch(launchRequestOf(body, user));
  }

  async launch(request: LaunchRequest): Promise<LaunchAnswer> {
    let made: User | null = null;
    let launch: ResolvedLaunch;
    const checks = new Map<object, unknown>();
    try {
      const user = request.user === 'anonymous' ? (made = await this.users.createAnonymous()) : request.user;
      launch = await this.resolve(request, user, made !== null);
      for (const step of this.steps.list()) {
        if (!step.run) continue;
        checks.set(step, await step.run(launch));
        if (launch.answer) return launch.answer;
      }
    } catch (err) {
      // Refused before anything was recorded: the user made for this request goes (a staged claim that failed
      // ends its workspace itself).
      if (made) await this.users.remove(made.id).catch(() => undefined);
      throw userGone(err, request) ?? err;
    }
    try {
      return await this.recorder.record(launch, checks);
    } catch (err) {
      throw userGone(err, request) ?? err;
    }
  }

  /** The user's group settings (a launch's client-settings override wins), and the image: image_id, else the user's default, else their groups'. */
  private async resolve(request: LaunchRequest, user: User, createdUser: boolean): Promise<ResolvedLaunch> {
    // A named image is read beside the group settings (a launch waits for both); its refusal still comes after
    // theirs, as when they were read in turn.
    const namedImage = request.imageId !== undefined ? this.images.find(request.imageId) : null;
    namedImage?.catch(() => undefined); // awaited below; unobserved only when the settings fail first
    const groupSettings = await this.settings.of(user.id);
    const settings = { ...groupSettings, clientSettings: { ...groupSettings.clientSettings, ...request.clientSettingsOverride } };
    if (namedImage) return { request, user, createdUser, settings, image: await namedImage, needsDockerHost: true };
    const fallback = (await this.users.defaultImageOf(user.id)) ?? settings.defaultImageId;
    if (!fallback) throw new ApiError(ErrorCode.InvalidRequest, 'image_id is required: the user and their groups have no default image');
    return { request, user, createdUser, settings, image: await this.images.find(fallback), needsDockerHost: true };
  }
}

/**
 * The request's user was deleted while the launch ran (an anonymous user removed with its last workspace, or
 * delete_user): the token or the workspace row then refers to no user. The same answer as an unknown user_id.
 */
function userGone(err: unknown, request: LaunchRequest): ApiError | null {
  const driver = err instanceof QueryFailedError ? (err.driverError as { code?: string; detail?: string }) : null;
  if (driver?.code !== FOREIGN_KEY_VIOLATION || !/table "users"/.test(driver.detail ?? '') || request.user === 'anonymous') return null;
  return ApiError.invalidId('user_id', toWireId(request.user.id));
}
