import { In, Repository } from 'typeorm';
import { ApiError, parseId } from '@ws/common';
import { LIVE_STATUSES, Workspace } from './workspace.entity';

export type WorkspaceTarget = { workspaceId: string } | { shareId: string };

const SHARE_ID = /^[0-9a-f]{32}$/;

/** A live workspace with its image (and attributes) and server, by id (either layout) or share id; 400 `Invalid …` otherwise. */
export async function findLiveWorkspace(workspaces: Repository<Workspace>, target: WorkspaceTarget): Promise<Workspace> {
  const relations = { image: { attributes: true }, server: true };
  if ('shareId' in target) {
    const workspace = SHARE_ID.test(target.shareId) ? await workspaces.findOne({ where: { shareId: target.shareId, status: In(LIVE_STATUSES) }, relations }) : null;
    if (!workspace) throw ApiError.invalidId('share_id', target.shareId);
    return workspace;
  }
  const id = parseId(target.workspaceId);
  const workspace = id ? await workspaces.findOne({ where: { id, status: In(LIVE_STATUSES) }, relations }) : null;
  if (!workspace) throw ApiError.invalidId('workspace_id', target.workspaceId);
  return workspace;
}
