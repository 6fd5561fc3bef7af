import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { ApiError, ErrorCode } from '@ws/common';
import { SessionTokensService } from '@ws/users/session-tokens.service';
import { Workspace } from './workspace.entity';
import { findLiveWorkspace, WorkspaceTarget } from './workspace-lookup';

export type ConnectTarget = WorkspaceTarget;

export interface WorkspaceGrant {
  workspace: Workspace;
  userId: string;
  viewOnly: boolean;
  /** The session token the grant rests on; revoking it ends the connections made with it. */
  sessionTokenId: string;
}

/**
 * Who may open which workspace in a browser. The JWT must be live (not revoked, expired or superseded);
 * an owner's link names the workspace and its owner; a view-only link (join_workspace) names the workspace
 * it was made for and grants nothing else.
 */
@Injectable()
export class WorkspaceAccess {
  constructor(
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly tokens: SessionTokensService,
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
    const workspace = await findLiveWorkspace(this.workspaces, target);
    if (claims.workspace_id !== workspace.id) throw new ApiError(ErrorCode.Unauthenticated, 'This link is for another workspace');
    const viewOnly = claims.view_only === true;
    if (viewOnly && !admits.viewOnly) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not the owner\'s link');
    if (!viewOnly && !admits.owner) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not a sharing link');
    if (!viewOnly && workspace.userId !== token.userId) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not the owner\'s link');
    if (viewOnly && !workspace.sharingEnabled) throw new ApiError(ErrorCode.InvalidState, 'Sharing is not enabled for this workspace');
    return { workspace, userId: token.userId, viewOnly, sessionTokenId: token.id };
  }
}
