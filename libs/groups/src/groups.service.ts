import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import { AccessService, Caller } from '@ws/auth';
import { ApiError, ErrorCode, parseId } from '@ws/common';
import { findByRef, rawQuery } from '@ws/database';
import { Entitlements } from '@ws/licensing';
import { DEFAULT_CLIENT_SETTINGS, type SettingsGroup } from './group-settings';
import { Group, SystemGroup, UsageInterval, UserGroup } from './group.entity';

export interface GroupSettingsChange {
  keepaliveExpiration?: number | null;
  usageLimit?: number | null;
  usageInterval?: UsageInterval;
  defaultImageId?: string | null;
  /** null: the group does not decide (a later group, or the default off). */
  recordSessions?: boolean | null;
  clientSettings?: Record<string, boolean | number>;
  priority?: number;
}

/** Group membership and the rules about built-in groups. */
@Injectable()
export class GroupsService {
  constructor(
    @InjectRepository(Group) private readonly groups: Repository<Group>,
    @InjectRepository(UserGroup) private readonly memberships: Repository<UserGroup>,
    private readonly access: AccessService,
    private readonly entitlements: Entitlements,
  ) {}

  async find(groupId: string): Promise<Group> {
    const id = parseId(groupId);
    const group = id ? await this.groups.findOneBy({ id }) : null;
    if (!group) throw ApiError.invalidId('group_id', groupId);
    return group;
  }

  findByRef(ref: string): Promise<Group> {
    return findByRef(this.groups, ref, 'name', 'group');
  }

  list(): Promise<Group[]> {
    return this.groups.find({ order: { priority: 'ASC', name: 'ASC' } });
  }

  /**
   * The operator's group settings (keepalive_expiration, usage_limit …); client settings merge into the current ones.
   * Setting a usage_limit needs the license's usage_limit feature (403, never silently ignored); clearing one
   * never does. A limit set under a license that has since lapsed stays enforced until it is cleared.
   */
  async updateSettings(ref: string, change: GroupSettingsChange): Promise<Group> {
    if (change.usageLimit !== undefined && change.usageLimit !== null) await this.entitlements.assertFeature('usage_limit', 'A group usage_limit');
    const group = await this.findByRef(ref);
    for (const [key, value] of Object.entries(change.clientSettings ?? {})) {
      const expected = DEFAULT_CLIENT_SETTINGS[key as keyof typeof DEFAULT_CLIENT_SETTINGS];
      if (expected === undefined || typeof expected !== typeof value) {
        throw new ApiError(ErrorCode.InvalidRequest, `Unknown client setting ${key} or wrong type (known: ${Object.keys(DEFAULT_CLIENT_SETTINGS).join(', ')})`);
      }
    }
    for (const [name, value] of [['keepalive_expiration', change.keepaliveExpiration], ['usage_limit', change.usageLimit]] as const) {
      if (value !== undefined && value !== null && (!Number.isInteger(value) || value < 0)) throw new ApiError(ErrorCode.InvalidRequest, `${name} must be a whole number of seconds`);
    }
    const { clientSettings, ...rest } = change;
    const patch = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
    await this.groups.update({ id: group.id }, { ...patch, ...(clientSettings ? { clientSettings: { ...group.clientSettings, ...clientSettings } } : {}) });
    return this.groups.findOneByOrFail({ id: group.id });
  }

  system(key: SystemGroup, manager: EntityManager = this.groups.manager): Promise<Group> {
    return manager.getRepository(Group).findOneByOrFail({ systemKey: key });
  }

  /** The groups of each user, ordered by priority (the first group decides conflicting settings). */
  groupsOf(userIds: string[]): Promise<Map<string, Group[]>> {
    return this.membersGroups(userIds, GROUP_COLUMNS, groupFromRow);
  }

  /**
   * Of each user's groups, in groupsOf's order, only what decides their settings (effectiveSettings): every
   * workspace read asks this for each owner, and the rest of a group's row (its permissions array, dates) cost
   * more to parse and keep than the settings themselves.
   */
  settingsGroupsOf(userIds: string[]): Promise<Map<string, SettingsGroup[]>> {
    return this.membersGroups(
      userIds,
      'g.name, g.priority, g.keepalive_expiration, g.usage_limit, g.usage_interval, g.default_image_id, g.record_sessions, g.client_settings',
      (row: SettingsGroupRow): SettingsGroup => ({
        keepaliveExpiration: row.keepalive_expiration, usageLimit: row.usage_limit, usageInterval: row.usage_interval,
        defaultImageId: row.default_image_id, recordSessions: row.record_sessions, clientSettings: row.client_settings,
      }),
    );
  }

  /** The groups of each user as user responses list them (id and name), in groupsOf's order. */
  groupSummariesOf(userIds: string[]): Promise<Map<string, Array<Pick<Group, 'id' | 'name'>>>> {
    return this.membersGroups(userIds, 'g.id, g.name, g.priority', (row: Pick<GroupRow, 'id' | 'name' | 'priority'>) => ({ id: row.id, name: row.name }));
  }

  /**
   * Each user's groups (every user named gets an entry), read with `columns` (which must include the name and
   * priority they are ordered by) and made into what the caller wants by `toGroup`. A raw select: on every
   * get_user, get_workspaces and status call, TypeORM's query building and hydration of the join cost several
   * times the query itself.
   */
  private async membersGroups<Row extends Pick<GroupRow, 'name' | 'priority'>, T>(
    userIds: string[], columns: string, toGroup: (row: Row) => T,
  ): Promise<Map<string, T[]>> {
    const result = new Map<string, T[]>(userIds.map((id) => [id, []]));
    if (userIds.length === 0) return result;
    const rows = await rawQuery<Row & { member_id: string }>(
      this.groups.manager.connection,
      `SELECT m.user_id AS member_id, ${columns} FROM user_groups m JOIN groups g ON g.id = m.group_id WHERE m.user_id = ANY($1)`,
      [[...new Set(userIds)]],
    );
    rows.sort(byPriorityThenName);
    for (const row of rows) result.get(row.member_id)?.push(toGroup(row));
    return result;
  }

  /** Whether the user is in a group with Global Admin; `manager`: the caller's transaction, if any. */
  async isGlobalAdmin(userId: string, manager: EntityManager = this.memberships.manager): Promise<boolean> {
    const count = await manager.getRepository(UserGroup)
      .createQueryBuilder('m')
      .innerJoin('m.group', 'g')
      .where('m.user_id = :userId', { userId })
      .andWhere(`'Global Admin' = ANY(g.permissions)`)
      .getCount();
    return count > 0;
  }

  async addMember(caller: Caller, userId: string, group: Group): Promise<void> {
    this.requireMembershipChange(caller, group);
    await this.memberships.createQueryBuilder().insert().values({ userId, groupId: group.id }).orIgnore().execute();
  }

  /** A membership the service itself makes, no caller to check (a cast link's visitor joins the link's group). */
  async join(userId: string, groupId: string): Promise<void> {
    await this.memberships.createQueryBuilder().insert().values({ userId, groupId }).orIgnore().execute();
  }

  async removeMember(caller: Caller, userId: string, group: Group): Promise<void> {
    this.requireMembershipChange(caller, group);
    await this.memberships.delete({ userId, groupId: group.id });
  }

  private requireMembershipChange(caller: Caller, group: Group): void {
    if (group.systemKey) this.access.require(caller, ['Groups Modify System'], `${group.name} is a built-in group`);
  }
}

/** The first group decides conflicting settings: lowest priority first, then by name. */
const byPriorityThenName = (a: { priority: number; name: string }, b: { priority: number; name: string }) => a.priority - b.priority || a.name.localeCompare(b.name);

const GROUP_COLUMNS = 'g.id, g.name, g.description, g.system_key, g.permissions, g.priority, g.keepalive_expiration, g.usage_limit, g.usage_interval, g.default_image_id, g.record_sessions, g.client_settings, g.created_at';

interface GroupRow {
  id: string;
  name: string;
  description: string | null;
  system_key: SystemGroup | null;
  permissions: Group['permissions'];
  priority: number;
  keepalive_expiration: number | null;
  usage_limit: number | null;
  usage_interval: UsageInterval;
  default_image_id: string | null;
  record_sessions: boolean | null;
  client_settings: Record<string, boolean | number>;
  created_at: Date;
}

type SettingsGroupRow = Pick<GroupRow, 'name' | 'priority' | 'keepalive_expiration' | 'usage_limit' | 'usage_interval' | 'default_image_id' | 'record_sessions' | 'client_settings'>;

/** A Group entity from a row of GROUP_COLUMNS (every column of the table). */
function groupFromRow(row: GroupRow): Group {
  return Object.assign(new Group(), {
    id: row.id, name: row.name, description: row.description, systemKey: row.system_key, permissions: row.permissions, priority: row.priority,
    keepaliveExpiration: row.keepalive_expiration, usageLimit: row.usage_limit, usageInterval: row.usage_interval, defaultImageId: row.default_image_id,
    recordSessions: row.record_sessions, clientSettings: row.client_settings, createdAt: row.created_at,
  });
}
