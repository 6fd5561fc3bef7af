import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import * as bcrypt from 'bcryptjs';
import { DataSource, In, QueryFailedError, Repository } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode, newId, parseId } from '@ws/common';
import { Group, UserGroup } from '@ws/groups/group.entity';
import { GroupsService } from '@ws/groups/groups.service';
import { Image } from '@ws/images/image.entity';
import { Server } from '@ws/servers/server.entity';
import { LIVE_STATUSES, Workspace } from '@ws/workspaces/workspace.entity';
import { rawQuery } from '@ws/database/raw-query';
import type { AttributeChanges, NewUserFields, UserChanges } from './dto/user.requests';
import type { GroupSummary, UserWorkspaceSummary } from './user.mappers';
import { UserAttributes } from './user-attributes.entity';
import { User } from './user.entity';

const BCRYPT_COST = 10;
const UNIQUE_VIOLATION = '23505';

/** Users, their attributes and their live workspaces (for reading): the rules of the Users area. */
@Injectable()
export class UsersService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(User) private readonly users: Repository<User>,
    @InjectRepository(UserAttributes) private readonly attributes: Repository<UserAttributes>,
    @InjectRepository(Workspace) private readonly workspaces: Repository<Workspace>,
    private readonly groups: GroupsService,
    private readonly access: AccessService,
  ) {}

  async create(fields: NewUserFields, options: { anonymous?: boolean; joinedWorkspaceId?: string } = {}): Promise<User> {
    const passwordHash = fields.password ? await bcrypt.hash(fields.password, BCRYPT_COST) : null;
    const user = this.users.create({
      id: newId(), username: fields.username, firstName: fields.first_name ?? null, lastName: fields.last_name ?? null,
      phone: fields.phone ?? null, organization: fields.organization ?? null, notes: fields.notes ?? null,
      locked: fields.locked ?? false, disabled: fields.disabled ?? false, realm: 'local', passwordHash,
      anonymous: options.anonymous ?? false, joinedWorkspaceId: options.joinedWorkspaceId ?? null, twoFactor: false, programId: null, lastSession: null,
    });
    try {
      await this.db.transaction(async (tx) => {
        await tx.insert(User, user);
        await tx.insert(UserAttributes, { id: newId(), userId: user.id, defaultImageId: null, autoLoginWorkspace: null, sshPublicKey: null });
        const allUsers = await this.groups.system('all_users', tx);
        await tx.insert(UserGroup, { userId: user.id, groupId: allUsers.id });
      });
    } catch (err) {
      throw duplicateUsername(err, fields.username);
    }
    return this.users.findOneByOrFail({ id: user.id });
  }

  /**
   * A throwaway user for request_workspace, a cast link or join_workspace without a user_id; one made to join a
   * workspace names it (`joinedWorkspaceId`). It is removed with its last workspace (AnonymousUsers, libs/workspaces).
   */
  createAnonymous(options: { joinedWorkspaceId?: string } = {}): Promise<User> {
    return this.create({ username: `anonymous-${newId().slice(0, 8)}${newId().slice(0, 8)}` }, { anonymous: true, ...options });
  }

  async find(userId: string): Promise<User> {
    const id = parseId(userId);
    const user = id ? await this.findOneRaw('id', id) : null;
    if (!user) throw ApiError.invalidId('user_id', userId);
    return user;
  }

  async findByLookup(lookup: { user_id?: string; username?: string }): Promise<User> {
    if (lookup.user_id !== undefined) return this.find(lookup.user_id);
    const user = await this.findOneRaw('username', lookup.username as string);
    if (!user) throw ApiError.invalidId('username', lookup.username);
    return user;
  }

  /** One user by a unique column, as a raw select (the hot read of most operations; see rawQuery). */
  private async findOneRaw(column: 'id' | 'username', value: string): Promise<User | null> {
    const [row] = await rawQuery<UserRow>(this.db, `SELECT ${USER_COLUMNS} FROM users u WHERE u.${column} = $1`, [value]);
    return row ? userFromRow(row) : null;
  }

  /** A user who may start sessions: neither locked nor disabled. */
  async findActive(userId: string): Promise<User> {
    const user = await this.find(userId);
    if (user.disabled) throw new ApiError(ErrorCode.InvalidState, `User (${userId}) is disabled`);
    if (user.locked) throw new ApiError(ErrorCode.InvalidState, `User (${userId}) is locked`);
    return user;
  }

  /** True when every one of these users exists and is neither locked nor disabled (open streams re-check this). */
  async allActive(userIds: string[]): Promise<boolean> {
    const ids = [...new Set(userIds)];
    return (await this.users.countBy({ id: In(ids), locked: false, disabled: false })) === ids.length;
  }

  list(): Promise<User[]> {
    return this.users.find({ order: { createdAt: 'ASC', id: 'ASC' } });
  }

  groupsOf(userIds: string[]): Promise<Map<string, Group[]>> {
    return this.groups.groupsOf(userIds);
  }

  /** Each user's groups as the user responses list them (name and id), in groupsOf's order. */
  groupSummariesOf(userIds: string[]): Promise<Map<string, GroupSummary[]>> {
    return this.groups.groupSummariesOf(userIds);
  }

  /** Each user's live workspaces, whole (with the server), oldest first. */
  async liveWorkspacesOf(userIds: string[]): Promise<Map<string, Workspace[]>> {
    const result = new Map<string, Workspace[]>(userIds.map((id) => [id, []]));
    if (userIds.length === 0) return result;
    // Raw select with the server joined (see rawQuery): every column of both, hydrated by hand.
    const rows = await rawQuery<WorkspaceWithServerRow>(
      this.db,
      `SELECT w.*, ${SERVER_COLUMNS} FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id
        WHERE w.user_id = ANY($1) AND w.status = ANY($2) ORDER BY w.start_date ASC`,
      [[...new Set(userIds)], LIVE_STATUSES],
    );
    for (const row of rows) result.get(row.user_id as string)?.push(workspaceFromRow(row));
    return result;
  }

  /**
   * Each user's live workspaces as get_user and get_users list them, oldest first: only the columns the
   * response shows (parsing a row costs per column, and a workspace with its server has over forty).
   */
  async liveWorkspaceSummariesOf(userIds: string[]): Promise<Map<string, UserWorkspaceSummary[]>> {
    const result = new Map<string, UserWorkspaceSummary[]>(userIds.map((id) => [id, []]));
    if (userIds.length === 0) return result;
    const rows = await rawQuery<WorkspaceSummaryRow>(
      this.db,
      `SELECT w.id, w.user_id, w.start_date, w.keepalive_date, w.expiration_date, w.host_ports, s.id AS s_id, s.hostname AS s_hostname
        FROM workspaces w LEFT JOIN servers s ON s.id = w.server_id
        WHERE w.user_id = ANY($1) AND w.status = ANY($2) ORDER BY w.start_date ASC`,
      [[...new Set(userIds)], LIVE_STATUSES],
    );
    for (const r of rows) {
      result.get(r.user_id)?.push({
        id: r.id, startDate: r.start_date, keepaliveDate: r.keepalive_date, expirationDate: r.expiration_date, hostPorts: r.host_ports,
        server: r.s_id === null ? null : { id: r.s_id, hostname: r.s_hostname as string },
      });
    }
    return result;
  }

  /** Rule 6: changing a Global Admin needs Users Modify Admin (or Global Admin). */
  async requireModifiable(caller: Caller, user: User): Promise<void> {
    if (await this.groups.isGlobalAdmin(user.id)) {
      this.access.require(caller, ['Users Modify Admin'], 'the target user is a Global Admin');
    }
  }

  async update(caller: Caller, changes: UserChanges): Promise<User> {
    const user = await this.find(changes.user_id);
    await this.requireModifiable(caller, user);
    const patch: Partial<User> = {};
    if (changes.username !== undefined) patch.username = changes.username;
    if (changes.first_name !== undefined) patch.firstName = changes.first_name;
    if (changes.last_name !== undefined) patch.lastName = changes.last_name;
    if (changes.phone !== undefined) patch.phone = changes.phone;
    if (changes.organization !== undefined) patch.organization = changes.organization;
    if (changes.notes !== undefined) patch.notes = changes.notes;
    if (changes.locked !== undefined) patch.locked = changes.locked;
    if (changes.disabled !== undefined) patch.disabled = changes.disabled;
    if (changes.password !== undefined) {
      patch.passwordHash = await bcrypt.hash(changes.password, BCRYPT_COST);
      patch.credentialsChangedAt = new Date();
    }
    if (Object.keys(patch).length > 0) {
      try {
        await this.users.update({ id: user.id }, patch);
      } catch (err) {
        throw duplicateUsername(err, changes.username ?? user.username);
      }
    }
    return this.users.findOneByOrFail({ id: user.id });
  }

  async getAttributes(userId: string): Promise<UserAttributes> {
    const user = await this.find(userId);
    return this.attributes.findOneByOrFail({ userId: user.id });
  }

  async updateAttributes(caller: Caller, changes: AttributeChanges): Promise<void> {
    const user = await this.find(changes.user_id);
    await this.requireModifiable(caller, user);
    const patch: Partial<UserAttributes> = {};
    if (changes.default_image !== undefined) {
      patch.defaultImageId = changes.default_image === null ? null : await this.imageId(changes.default_image);
    }
    if (changes.auto_login_workspace !== undefined) patch.autoLoginWorkspace = changes.auto_login_workspace;
    if (changes.show_tips !== undefined) patch.showTips = changes.show_tips;
    if (changes.toggle_control_panel !== undefined) patch.toggleControlPanel = changes.toggle_control_panel;
    if (changes.chat_sfx !== undefined) patch.chatSfx = changes.chat_sfx;
    if (changes.ssh_public_key !== undefined) patch.sshPublicKey = changes.ssh_public_key;
    if (Object.keys(patch).length > 0) await this.attributes.update({ userId: user.id }, patch);
  }

  private async imageId(value: string): Promise<string> {
    const id = parseId(value);
    const exists = id ? await this.db.getRepository(Image).existsBy({ id }) : false;
    if (!exists) throw ApiError.invalidId('default_image', value);
    return id as string;
  }

  async recordSession(userId: string, at: Date): Promise<void> {
    await this.users.update({ id: userId }, { lastSession: at });
  }
}

const USER_COLUMNS = [
  'id', 'username', 'first_name', 'last_name', 'phone', 'organization', 'notes', 'locked', 'disabled', 'realm', 'password_hash', 'anonymous',
  'joined_workspace_id', 'two_factor', 'program_id', 'last_session', 'credentials_changed_at', 'created_at', 'updated_at',
].map((c) => `u.${c}`).join(', ');

interface UserRow {
  id: string; username: string; first_name: string | null; last_name: string | null; phone: string | null; organization: string | null;
  notes: string | null; locked: boolean; disabled: boolean; realm: string; password_hash: string | null; anonymous: boolean;
  joined_workspace_id: string | null; two_factor: boolean;
  program_id: string | null; last_session: Date | null; credentials_changed_at: Date; created_at: Date; updated_at: Date;
}

function userFromRow(r: UserRow): User {
  return Object.assign(new User(), {
    id: r.id, username: r.username, firstName: r.first_name, lastName: r.last_name, phone: r.phone, organization: r.organization, notes: r.notes,
    locked: r.locked, disabled: r.disabled, realm: r.realm, passwordHash: r.password_hash, anonymous: r.anonymous, joinedWorkspaceId: r.joined_workspace_id,
    twoFactor: r.two_factor,
    programId: r.program_id, lastSession: r.last_session, credentialsChangedAt: r.credentials_changed_at, createdAt: r.created_at, updatedAt: r.updated_at,
  });
}

/** The server's columns under an `s_` prefix, beside `w.*`. */
const SERVER_COLUMNS = [
  'id', 'hostname', 'docker_endpoint', 'tls_ca_path', 'tls_cert_path', 'tls_key_path', 'publish_host', 'zone_id', 'enabled', 'cores', 'memory', 'provider', 'created_at',
].map((c) => `s.${c} AS s_${c}`).join(', ');

interface WorkspaceWithServerRow {
  [column: string]: unknown;
  user_id: string | null;
  s_id: string | null;
}

interface WorkspaceSummaryRow {
  id: string; user_id: string; start_date: Date; keepalive_date: Date; expiration_date: Date;
  host_ports: Workspace['hostPorts']; s_id: string | null; s_hostname: string | null;
}

/** Numeric and bigint columns come back as strings (see @ws/database/columns). */
const toNumber = (v: unknown) => (v === null ? null : Number(v));

function workspaceFromRow(r: WorkspaceWithServerRow): Workspace {
  const server = r.s_id === null ? null : Object.assign(new Server(), {
    id: r.s_id, hostname: r.s_hostname, dockerEndpoint: r.s_docker_endpoint, tlsCaPath: r.s_tls_ca_path, tlsCertPath: r.s_tls_cert_path,
    tlsKeyPath: r.s_tls_key_path, publishHost: r.s_publish_host, zoneId: r.s_zone_id, enabled: r.s_enabled, cores: toNumber(r.s_cores),
    memory: toNumber(r.s_memory), provider: r.s_provider, createdAt: r.s_created_at,
  });
  return Object.assign(new Workspace(), {
    id: r.id, userId: r.user_id, imageId: r.image_id, serverId: r.server_id, server, status: r.status, operationalMessage: r.operational_message,
    operationalProgress: r.operational_progress, containerId: r.container_id, containerIp: r.container_ip, hostPorts: r.host_ports,
    cores: toNumber(r.cores), memory: toNumber(r.memory), token: r.token, viewOnlyToken: r.view_only_token, sessionTokenId: r.session_token_id,
    launchOptions: r.launch_options, shareId: r.share_id, sharingEnabled: r.sharing_enabled, environment: r.environment,
    persistentProfileMode: r.persistent_profile_mode, isPersistentProfile: r.is_persistent_profile, startDate: r.start_date,
    keepaliveDate: r.keepalive_date, expirationDate: r.expiration_date, destroyedAt: r.destroyed_at, destroyReason: r.destroy_reason,
    createdAt: r.created_at, updatedAt: r.updated_at,
  });
}

function duplicateUsername(err: unknown, username: string): unknown {
  if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) {
    return new ApiError(ErrorCode.Conflict, `Username (${username}) is already taken`);
  }
  return err;
}
