import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import * as bcrypt from 'bcryptjs';
import { DataSource, EntityManager, In, QueryFailedError, Repository } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode, newId, parseId } from '@ws/common';
import { Group, UserGroup, GroupsService } from '@ws/groups';
import { Image } from '@ws/images';
import { creationOrder, KeysetList, listPage, PageAnswer, PageRequest, rawQuery } from '@ws/database';
import type { AttributeChanges, NewUserFields, UserChanges } from './dto/user.requests';
import type { GroupSummary } from './user.mappers';
import { UserAttributes } from './user-attributes.entity';
import { appendUserEvent } from './user-events';
import { User } from './user.entity';

const BCRYPT_COST = 10;
const UNIQUE_VIOLATION = '23505';
const USERS_LIST: KeysetList = { name: 'users', from: 'users u', keys: creationOrder('u') };

/** Users and their attributes: the rules of the Users area (their workspaces are the workspaces library's: UserWorkspaces). */
@Injectable()
export class UsersService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(User) private readonly users: Repository<User>,
    @InjectRepository(UserAttributes) private readonly attributes: Repository<UserAttributes>,
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
        if (!user.anonymous) await appendUserEvent(tx, user.id, 'created', { username: user.username });
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

  /** get_users: every user in creation order, or one page of them (`limit`, `cursor`). */
  list(request: PageRequest = {}): Promise<{ rows: User[]; paging: PageAnswer }> {
    return listPage(this.db, USERS_LIST, request, () => this.users.find({ order: { createdAt: 'ASC', id: 'ASC' } }), (ids) => this.users.findBy({ id: In(ids) }));
  }

  groupsOf(userIds: string[]): Promise<Map<string, Group[]>> {
    return this.groups.groupsOf(userIds);
  }

  /** Each user's groups as the user responses list them (name and id), in groupsOf's order. */
  groupSummariesOf(userIds: string[]): Promise<Map<string, GroupSummary[]>> {
    return this.groups.groupSummariesOf(userIds);
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
        await this.db.transaction(async (tx) => {
          await tx.update(User, { id: user.id }, patch);
          // The wire names of what changed (never the password itself).
          const changed = Object.keys(changes).filter((name) => name !== 'user_id' && (changes as unknown as Record<string, unknown>)[name] !== undefined);
          if (!user.anonymous) await appendUserEvent(tx, user.id, 'updated', { username: patch.username ?? user.username, changed });
        });
      } catch (err) {
        throw duplicateUsername(err, changes.username ?? user.username);
      }
    }
    return this.users.findOneByOrFail({ id: user.id });
  }

  /** The user's own default image (an attribute), by id; null when none is set. */
  async defaultImageOf(id: string): Promise<string | null> {
    return (await this.attributes.findOneBy({ userId: id }))?.defaultImageId ?? null;
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

  /**
   * Deletes a user by id, its tokens, login links, memberships and attributes with it (foreign keys). The
   * database refuses a user who still owns a live workspace (trigger, SQLSTATE WSL01): the workspaces library
   * ends those first (UserDeletion) and reads that refusal.
   */
  async remove(id: string, manager?: EntityManager): Promise<void> {
    const run = async (tx: EntityManager) => {
      const [rows] = (await tx.query('DELETE FROM users WHERE id = $1 RETURNING username, anonymous', [id])) as [Array<{ username: string; anonymous: boolean }>, number];
      const [gone] = rows;
      if (gone && !gone.anonymous) await appendUserEvent(tx, id, 'deleted', { username: gone.username });
    };
    await (manager ? run(manager) : this.db.transaction(run));
  }

  /** Deletes those of these users that are anonymous (never a named one); answers how many went. */
  async removeAnonymous(ids: string[], manager: EntityManager = this.db.manager): Promise<number> {
    if (ids.length === 0) return 0;
    return (await manager.delete(User, { id: In(ids), anonymous: true })).affected ?? 0;
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

function duplicateUsername(err: unknown, username: string): unknown {
  if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) {
    return new ApiError(ErrorCode.Conflict, `Username (${username}) is already taken`);
  }
  return err;
}
