import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { MoreThan, Repository } from 'typeorm';
import { ApiError, ErrorCode, toWireId } from '@ws/common';
import { SessionToken, SessionTokensService, User, UsersService } from '@ws/users';
import { Workspace } from '../workspace.entity';
import { findLiveWorkspace, WorkspaceTarget } from './workspace-lookup';

export type ConnectTarget = WorkspaceTarget;

export interface WorkspaceGrant {
  workspace: Workspace;
  userId: string;
  /** The link's user, as read for the grant (neither locked nor disabled). */
  user: User;
  viewOnly: boolean;
  /** The session token the grant rests on; revoking it ends the connections made with it. */
  sessionTokenId: string;
}

/** What an open stream rests on: re-checked when any of it changes (PostgreSQL notices). */
export interface StreamStanding {
  sessionTokenId: string;
  userId: string;
  ownerId: string | null;
}

/**
 * Who may open which workspace in a browser. The JWT must be live (not revoked, expired or superseded);
 * an owner's link names the workspace and its owner; a view-only link (join_workspace) names the workspace
 * it was made for and grants nothing else. The link's user must be neither locked nor disabled, and neither
 * may the workspace's owner be: a locked owner's workspace is not streamed to joiners either.
 */
@Injectable()
export class WorkspaceAccess {
  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly tokens: SessionTokensService,
    private readonly users: UsersService,
    @InjectRepository(SessionToken) private readonly tokenRows: Repository<SessionToken>,
  ) {}

  /** A connect link: a workspace link admits only its owner, a share link only a view-only joiner. */
  authorize(jwt: string, target: ConnectTarget): Promise<WorkspaceGrant> {
    return this.grant(jwt, target, { owner: 'workspaceId' in target, viewOnly: 'shareId' in target });
  }

  /** A stream connection: the owner's link, or a view-only link made for this workspace. */
  authorizeStream(jwt: string, workspaceId: string): Promise<WorkspaceGrant> {
    return this.grant(jwt, { workspaceId }, { owner: true, viewOnly: true });
  }

  private async grant(jwt: string, target: ConnectTarget, admits: { owner: boolean; viewOnly: boolean }): Promise<WorkspaceGrant> {
    const verified = await this.tokens.verify(jwt);
    if (!verified) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not valid any more: it expired, was replaced by a newer one, or the session was logged out');
    const { claims, token } = verified;
    // The link's user is read beside its workspace (a connect and a stream's upgrade wait for each round trip); the
    // workspace's checks still come first, so a wrong link gets the same answer as before.
    const [found, userRead] = await Promise.allSettled([findLiveWorkspace(this.workspaces, target), this.users.find(toWireId(token.userId))]);
    if (found.status === 'rejected') throw found.reason;
    const workspace = found.value;
    if (claims.workspace_id !== workspace.id) throw new ApiError(ErrorCode.Unauthenticated, 'This link is for another workspace');
    const viewOnly = claims.view_only === true;
    if (viewOnly && !admits.viewOnly) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not the owner\'s link');
    if (!viewOnly && !admits.owner) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not a sharing link');
    if (!viewOnly && workspace.userId !== token.userId) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not the owner\'s link');
    if (viewOnly && !workspace.sharingEnabled) throw new ApiError(ErrorCode.InvalidState, 'Sharing is not enabled for this workspace');
    if (userRead.status === 'rejected') throw userRead.reason;
    const user = userRead.value;
    refuseInactive(user, `User (${toWireId(user.id)})`);
    if (viewOnly && workspace.userId) refuseInactive(await this.users.find(toWireId(workspace.userId)), 'The owner of this workspace');
    return { workspace, userId: token.userId, user, viewOnly, sessionTokenId: token.id };
  }

  /** Why an open stream must end now (its session token is gone or expired, or a user it rests on is locked or disabled), or null. */
  async endReason(standing: StreamStanding): Promise<string | null> {
    const live = await this.tokenRows.existsBy({ id: standing.sessionTokenId, expiresAt: MoreThan(new Date()) });
    if (!live) return 'the session was logged out';
    const users = standing.ownerId ? [standing.userId, standing.ownerId] : [standing.userId];
    return (await this.users.allActive(users)) ? null : 'the user is locked or disabled';
  }
}

function refuseInactive(user: User, who: string): void {
  if (user.disabled) throw new ApiError(ErrorCode.InvalidState, `${who} is disabled`);
  if (user.locked) throw new ApiError(ErrorCode.InvalidState, `${who} is locked`);
}
