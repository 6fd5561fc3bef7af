import type { EffectiveGroupSettings } from '@ws/groups';
import type { Image } from '@ws/images';
import type { IssuedToken, User } from '@ws/users';
import type { RequestWorkspaceRequest } from '../dto/workspace.requests';
import type { WorkspaceServerConnection } from '../workspace.entity';

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

/** Inputs of a launch that are not the integrator's to set (a cast link's rules). */
export interface LaunchInputs {
  /** Client settings that override the user's groups' for this workspace (enforce_client_settings of a cast link). */
  clientSettingsOverride?: Record<string, boolean>;
  /** The Docker network the container joins (a cast visitor's choice among the image's selectable_networks). */
  containerNetwork?: string;
  /** The user the caller already loaded and found active (a cast visitor): launched for as it is, not looked up again. */
  user?: User;
}

/** What the steps learn about the launch, each field set by the step named beside it. */
export interface LaunchFacts {
  /** "server connection": a server image's connection (issue 14) and its plaintext password (sealed when recorded); null for a container image. */
  serverSession?: { connection: WorkspaceServerConnection; password: string } | null;
  /** "persistent profile": where the workspace loads and saves its profile (modes Enabled and Reset), else null. */
  profileLocation?: string | null;
  /** "egress": the user's groups (ids), for an egress credential attached to one of them; set only when a gateway is asked for. */
  egressGroupIds?: string[];
}

/** A launch once its user, settings and image are known: what every step reads. */
export interface ResolvedLaunch {
  readonly request: RequestWorkspaceRequest;
  readonly inputs: LaunchInputs;
  readonly user: User;
  /**
   * True when the launch made the user (anonymous, for this request). Only such a user goes when the launch fails:
   * a user who existed before it (an earlier anonymous one included) keeps its workspaces (issue 19).
   */
  readonly createdUser: boolean;
  /** The user's group settings with the launch's client-settings override on top. */
  readonly settings: EffectiveGroupSettings;
  readonly image: Image;
  readonly facts: LaunchFacts;
  /** Set by a step that serves the request itself (a staged workspace claimed): the steps after it do not run. */
  answer?: LaunchAnswer;
}

/** A launch about to be recorded: the workspace's id and the owner's token that names it are minted. */
export interface IssuedLaunch extends ResolvedLaunch {
  readonly workspaceId: string;
  readonly issued: IssuedToken;
}
