import { createHash } from 'node:crypto';
import { formatTimestamp, toWireId } from '@ws/common';
import type { Group } from '@ws/groups';
import type { UserAttributes } from './user-attributes.entity';
import type { User } from './user.entity';
import type { SessionToken } from './session-token.entity';

/** What a user response shows of a group (a Group entity has it). */
export type GroupSummary = Pick<Group, 'id' | 'name'>;

/** What a user response shows of a live workspace and its server (the workspaces library's UserWorkspaces reads it). */
export interface UserWorkspaceSummary {
  id: string;
  startDate: Date;
  keepaliveDate: Date;
  expirationDate: Date;
  hostPorts: Record<string, number>;
  server?: { id: string; hostname: string } | null;
}

export const toGroupRef = (g: GroupSummary) => ({ name: g.name, group_id: toWireId(g.id) });

/** A user's workspace as get_user and get_users list it. `server.port` is the host port serving the workspace's stream. */
export function toUserWorkspace(w: UserWorkspaceSummary) {
  return {
    workspace_id: toWireId(w.id),
    start_date: formatTimestamp(w.startDate),
    keepalive_date: formatTimestamp(w.keepaliveDate),
    expiration_date: formatTimestamp(w.expirationDate),
    server: w.server ? { server_id: toWireId(w.server.id), hostname: w.server.hostname, port: w.hostPorts.vnc ?? null } : null,
  };
}

/** A fingerprint of the user's identity and credentials: changes when the password changes. */
export const userHash = (u: User) => createHash('sha256').update(`${u.id}:${u.credentialsChangedAt.toISOString()}`).digest('hex');

export function toUserResponse(u: User, groups: GroupSummary[]) {
  return {
    user_id: toWireId(u.id),
    username: u.username,
    first_name: u.firstName,
    last_name: u.lastName,
    phone: u.phone,
    organization: u.organization,
    notes: u.notes,
    locked: u.locked,
    disabled: u.disabled,
    realm: u.realm,
    last_session: formatTimestamp(u.lastSession),
    groups: groups.map(toGroupRef),
  };
}

export const toUserDetailResponse = (u: User, groups: GroupSummary[], workspaces: UserWorkspaceSummary[]) => ({
  ...toUserResponse(u, groups),
  workspaces: workspaces.map(toUserWorkspace),
  two_factor: u.twoFactor,
  program_id: u.programId,
  hash: userHash(u),
});

/** get_users items; companies are not modelled yet, so `company` is null (docs/decisions.md). */
export const toUserListItem = (u: User, groups: GroupSummary[], workspaces: UserWorkspaceSummary[]) => ({
  ...toUserResponse(u, groups),
  workspaces: workspaces.map(toUserWorkspace),
  company: null,
});

export const toUserAttributesResponse = (a: UserAttributes) => ({
  user_attributes_id: toWireId(a.id),
  user_id: toWireId(a.userId),
  ssh_public_key: a.sshPublicKey,
  show_tips: a.showTips,
  toggle_control_panel: a.toggleControlPanel,
  chat_sfx: a.chatSfx,
  default_image: toWireId(a.defaultImageId),
  auto_login_workspace: a.autoLoginWorkspace,
});

export const toSessionTokenResponse = (t: SessionToken, jwt?: string) => ({
  session_token: toWireId(t.id),
  session_token_date: formatTimestamp(t.tokenDate),
  expires_at: formatTimestamp(t.expiresAt),
  ...(jwt === undefined ? {} : { session_jwt: jwt }),
});
