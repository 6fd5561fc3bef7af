import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { ApiError, ErrorCode, parseId } from '@ws/common';
import { SessionTokensService } from '@ws/users/session-tokens.service';
import { LIVE_STATUSES, Workspace } from './workspace.entity';

export type ConnectTarget = { workspaceId: string } | { shareId: string };

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

  async authorize(jwt: string, target: ConnectTarget): Promise<WorkspaceGrant> {
    const verified = await this.tokens.verify(jwt);
    if (!verified) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not valid any more: it expired, was replaced by a newer one, or the session was logged out');
    const { claims, token } = verified;
    const workspace = await this.findTarget(target);
    if (claims.workspace_id !== workspace.id) throw new ApiError(ErrorCode.Unauthenticated, 'This link is for another workspace');
    const viewOnly = claims.view_only === true;
    if ('shareId' in target && !viewOnly) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not a sharing link');
    if ('workspaceId' in target && (viewOnly || workspace.userId !== token.userId)) throw new ApiError(ErrorCode.Unauthenticated, 'This link is not the owner\'s link');
    if (viewOnly && !workspace.sharingEnabled) throw new ApiError(ErrorCode.InvalidState, 'Sharing is not enabled for this workspace');
    return { workspace, userId: token.userId, viewOnly, sessionTokenId: token.id };
  }

  /** A stream connection: the owner's link, or a view-only link made for this workspace. */
  async authorizeStream(jwt: string, workspaceId: string): Promise<WorkspaceGrant> {
    const verified = await this.tokens.verify(jwt);
    if (!verified) throw new ApiError(ErrorCode.Unauthenticated, 'This session is not valid any more');
    const workspace = await this.findTarget({ workspaceId });
    const viewOnly = verified.claims.view_only === true;
    if (verified.claims.workspace_id !== workspace.id) throw new ApiError(ErrorCode.Unauthenticated, 'This session is for another workspace');
    if (!viewOnly && workspace.userId !== verified.token.userId) throw new ApiError(ErrorCode.Unauthenticated, 'This session is not the owner\'s');
    if (viewOnly && !workspace.sharingEnabled) throw new ApiError(ErrorCode.InvalidState, 'Sharing is not enabled for this workspace');
    return { workspace, userId: verified.token.userId, viewOnly, sessionTokenId: verified.token.id };
  }

  private async findTarget(target: ConnectTarget): Promise<Workspace> {
    const relations = { image: { attributes: true }, server: true };
    if ('shareId' in target) {
      const workspace = /^[0-9a-f]{32}$/.test(target.shareId)
        ? await this.workspaces.findOne({ where: { shareId: target.shareId, status: In(LIVE_STATUSES) }, relations })
        : null;
      if (!workspace) throw ApiError.invalidId('share_id', target.shareId);
      return workspace;
    }
    const id = parseId(target.workspaceId);
    const workspace = id ? await this.workspaces.findOne({ where: { id, status: In(LIVE_STATUSES) }, relations }) : null;
    if (!workspace) throw ApiError.invalidId('workspace_id', target.workspaceId);
    return workspace;
  }
}

