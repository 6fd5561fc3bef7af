import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import * as bcrypt from 'bcryptjs';
import { DataSource, In, QueryFailedError, Repository } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode, newId, parseId } from '@ws/common';
import { Group, UserGroup } from '@ws/groups/group.entity';
import { GroupsService } from '@ws/groups/groups.service';
import { Image } from '@ws/images/image.entity';
import { LIVE_STATUSES, Workspace } from '@ws/workspaces/workspace.entity';
import type { AttributeChanges, NewUserFields, UserChanges } from './dto/user.requests';
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

  async create(fields: NewUserFields, options: { anonymous?: boolean } = {}): Promise<User> {
    const passwordHash = fields.password ? await bcrypt.hash(fields.password, BCRYPT_COST) : null;
    const user = this.users.create({
      id: newId(), username: fields.username, firstName: fields.first_name ?? null, lastName: fields.last_name ?? null,
      phone: fields.phone ?? null, organization: fields.organization ?? null, notes: fields.notes ?? null,
      locked: fields.locked ?? false, disabled: fields.disabled ?? false, realm: 'local', passwordHash,
      anonymous: options.anonymous ?? false, twoFactor: false, programId: null, lastSession: null,
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

  /** A throwaway user for request_workspace or join_workspace without a user_id. */
  createAnonymous(): Promise<User> {
    return this.create({ username: `anonymous-${newId().slice(0, 8)}${newId().slice(0, 8)}` }, { anonymous: true });
  }

  async find(userId: string): Promise<User> {
    const id = parseId(userId);
    const user = id ? await this.users.findOneBy({ id }) : null;
    if (!user) throw ApiError.invalidId('user_id', userId);
    return user;
  }

  async findByLookup(lookup: { user_id?: string; username?: string }): Promise<User> {
    if (lookup.user_id !== undefined) return this.find(lookup.user_id);
    const user = await this.users.findOneBy({ username: lookup.username as string });
    if (!user) throw ApiError.invalidId('username', lookup.username);
    return user;
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

  async liveWorkspacesOf(userIds: string[]): Promise<Map<string, Workspace[]>> {
    const result = new Map<string, Workspace[]>(userIds.map((id) => [id, []]));
    if (userIds.length === 0) return result;
    const rows = await this.workspaces.find({
      where: { userId: In(userIds), status: In(LIVE_STATUSES) },
      relations: { server: true },
      order: { startDate: 'ASC' },
    });
    for (const w of rows) result.get(w.userId as string)?.push(w);
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

function duplicateUsername(err: unknown, username: string): unknown {
  if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) {
    return new ApiError(ErrorCode.Conflict, `Username (${username}) is already taken`);
  }
  return err;
}
