import type { EffectiveGroupSettings } from '@ws/groups';
import type { Image } from '@ws/images';
import type { IssuedToken, User } from '@ws/users';
import type { RequestWorkspaceRequest } from '../dto/workspace.requests';

/** request_workspace's answer. */
export interface LaunchAnswer {
  workspace_id: string;
  session_token: string;
  username: string;
  status: string;
  share_id: string;
  user_id: string;
  workspace_url: string;
}

/**
 * What a launch is asked for, in the domain's terms: request_workspace's body once its user is loaded, or a cast
 * link's launch (which adds the link's rules). The steps read this, never the HTTP DTO.
 */
export interface LaunchRequest {
  /** The user the caller loaded and found active, or 'anonymous': a user made for this launch (gone if it fails). */
  readonly user: User | 'anonymous';
  /** Wire id; absent: the user's default image, else their groups'. */
  readonly imageId?: string;
  readonly enableSharing: boolean;
  readonly workspaceUrl?: string;
  /** Empty when none was asked for. */
  readonly environment: Readonly<Record<string, string>>;
  /** A server image's connection_info and rdp_client_type (the server connection step's). */
  readonly connectionInfo?: Record<string, unknown>;
  readonly rdpClientType?: 'GUAC' | 'RDP_CLIENT';
  readonly clientLanguage?: string;
  readonly clientTimezone?: string;
  /** Wire id of the egress gateway to join. */
  readonly egressGatewayId?: string;
  readonly persistentProfileMode?: 'Enabled' | 'Disabled' | 'Reset';
  /** A cast link's enforced client settings: they override the user's groups' for this workspace. Empty for request_workspace. */
  readonly clientSettingsOverride: Readonly<Record<string, boolean>>;
  /** The Docker network the container joins (a cast visitor's choice among the image's selectable_networks). */
  readonly containerNetwork?: string;
}

/** request_workspace's body as a launch for `user` (loaded by the caller, or 'anonymous' when the body names none). */
export function launchRequestOf(body: RequestWorkspaceRequest, user: User | 'anonymous'): LaunchRequest {
  return {
    user, imageId: body.image_id, enableSharing: body.enable_sharing ?? false, workspaceUrl: body.workspace_url, environment: body.environment ?? {},
    connectionInfo: body.connection_info, rdpClientType: body.rdp_client_type, clientLanguage: body.client_language, clientTimezone: body.client_timezone,
    egressGatewayId: body.egress_gateway_id, persistentProfileMode: body.persistent_profile_mode, clientSettingsOverride: {},
  };
}

/** A launch once its user, settings and image are known: what every step's `run` reads. */
export interface ResolvedLaunch {
  readonly request: LaunchRequest;
  readonly user: User;
  /**
   * True when the launch made the user (anonymous, for this request). Only such a user goes when the launch fails:
   * a user who existed before it (an earlier anonymous one included) keeps its workspaces (issue 19).
   */
  readonly createdUser: boolean;
  /** The user's group settings with the launch's client-settings override on top. */
  readonly settings: EffectiveGroupSettings;
  readonly image: Image;
  /**
   * Whether the workspace takes room on a Docker host (placement reserves one before the steps' reservations).
   * True unless a step says otherwise: the server connection step, for a VNC server reached directly.
   */
  needsDockerHost: boolean;
  /** Set by a step that serves the request itself (a staged workspace claimed): the steps after it do not run. */
  answer?: LaunchAnswer;
}

/** A launch about to be recorded: the workspace's id and the owner's token that names it are minted. */
export interface IssuedLaunch extends ResolvedLaunch {
  readonly workspaceId: string;
  readonly issued: IssuedToken;
}

/** What each step's `run` found, handed to that step's own `reserve` (and to no other step). */
export type LaunchChecks = ReadonlyMap<object, unknown>;
