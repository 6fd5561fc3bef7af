import { Injectable } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import { ImagesService } from '@ws/images';
import { User, UsersService } from '@ws/users';
import type { RequestWorkspaceRequest } from '../dto/workspace.requests';
import { WorkspaceSettings } from '../reads/workspace-settings.service';
import type { LaunchAnswer, LaunchInputs, ResolvedLaunch } from './launch-context';
import { LaunchRecorder } from './launch-recorder.service';
import { LaunchSteps } from './launch-steps';

const FOREIGN_KEY_VIOLATION = '23503';

/**
 * request_workspace and a cast launch: resolve the user (or make an anonymous one), their effective settings and
 * the image; run every module's launch steps in order (LaunchSteps: limits, server connection, persistent
 * profile, egress, claim staged, …), any of which may refuse or serve the request; then record it
 * (LaunchRecorder: token, workspace row, provision job). Slow work (the container) is the worker's.
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

  async request(request: RequestWorkspaceRequest, inputs: LaunchInputs = {}): Promise<LaunchAnswer> {
    let made: User | null = null;
    let launch: ResolvedLaunch;
    try {
      const user = inputs.user ?? (request.user_id !== undefined ? await this.users.findActive(request.user_id) : (made = await this.users.createAnonymous()));
      launch = await this.resolve(request, inputs, user, made !== null);
      for (const step of this.steps.list()) {
        if (!step.run) continue;
        await step.run(launch);
        if (launch.answer) return launch.answer;
      }
    } catch (err) {
      // Refused before anything was recorded: the user made for this request goes (a staged claim that failed
      // ends its workspace itself).
      if (made) await this.users.remove(made.id).catch(() => undefined);
      throw userGone(err, request) ?? err;
    }
    try {
      return await this.recorder.record(launch);
    } catch (err) {
      throw userGone(err, request) ?? err;
    }
  }

  /** The user's group settings (a launch's client-settings override wins), and the image: image_id, else the user's default, else their groups'. */
  private async resolve(request: RequestWorkspaceRequest, inputs: LaunchInputs, user: User, createdUser: boolean): Promise<ResolvedLaunch> {
    const groupSettings = await this.settings.of(user.id);
    const settings = { ...groupSettings, clientSettings: { ...groupSettings.clientSettings, ...(inputs.clientSettingsOverride ?? {}) } };
    let imageId = request.image_id;
    if (imageId === undefined) {
      const fallback = (await this.users.defaultImageOf(user.id)) ?? settings.defaultImageId;
      if (!fallback) throw new ApiError(ErrorCode.InvalidRequest, 'image_id is required: the user and their groups have no default image');
      imageId = fallback;
    }
    return { request, inputs, user, createdUser, settings, image: await this.images.find(imageId), facts: {} };
  }
}

/**
 * The request's user was deleted while the launch ran (an anonymous user removed with its last workspace, or
 * delete_user): the token or the workspace row then refers to no user. The same answer as an unknown user_id.
 */
function userGone(err: unknown, request: RequestWorkspaceRequest): ApiError | null {
  const driver = err instanceof QueryFailedError ? (err.driverError as { code?: string; detail?: string }) : null;
  if (driver?.code !== FOREIGN_KEY_VIOLATION || !/table "users"/.test(driver.detail ?? '') || request.user_id === undefined) return null;
  return ApiError.invalidId('user_id', request.user_id);
}
