import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In, QueryFailedError } from 'typeorm';
import { ApiError, ErrorCode, newId, parseId, randomSecret } from '@ws/common';
import { creationOrder, KeysetList, listPage, PageAnswer, PageRequest } from '@ws/database';
import { DEFAULT_CLIENT_SETTINGS, Group } from '@ws/groups';
import { Image } from '@ws/images';
import { Entitlements } from '@ws/licensing';
import type { CastConfigChanges, NewCastConfig } from './dto/cast-config.requests';
import { CAST_FLAG_NAMES, CAST_FLAGS, CastConfig, CastFlag } from './cast-config.entity';

const UNIQUE_VIOLATION = '23505';
const CAST_CONFIGS_LIST: KeysetList = { name: 'cast_configs', from: 'cast_configs c', keys: creationOrder('c') };
/** Defaults of a config's numbers when create omits them (docs/decisions.md, Casting). */
export const CAST_DEFAULTS = { sessionRemaining: 0, ipRequestLimit: 10, ipRequestSeconds: 60 };

/** A flag omitted on create: the deployment's client-setting default for the allow_* ones, else off. */
function defaultFlag(name: CastFlag): boolean {
  const fallback = (DEFAULT_CLIENT_SETTINGS as Record<string, unknown>)[name];
  return typeof fallback === 'boolean' ? fallback : false;
}

/** `2026-12-31 23:59:59` is UTC (the spec's timestamps); an explicit zone is honoured. */
export function parseUtcTimestamp(value: string, field: string): Date {
  const iso = value.replace(' ', 'T');
  const date = new Date(/(Z|[+-]\d{2}:?\d{2})$/.test(iso) ? iso : `${iso}Z`);
  if (Number.isNaN(date.getTime())) throw new ApiError(ErrorCode.InvalidRequest, `${field} is not a valid timestamp (${value})`);
  return date;
}

/**
 * Casting configs: the five operations. The launch of a link is CastLaunch's. Creating and changing configs
 * needs the license's session_casting, and a config that turns sharing on its sessions session_sharing (403);
 * reading and deleting never do.
 */
@Injectable()
export class CastingService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly entitlements: Entitlements,
  ) {}

  /** get_cast_configs: every config in creation order, or one page of them (`limit`, `cursor`). */
  list(request: PageRequest = {}): Promise<{ rows: CastConfig[]; paging: PageAnswer }> {
    const configs = this.db.getRepository(CastConfig);
    return listPage(this.db, CAST_CONFIGS_LIST, request,
      () => configs.find({ relations: { image: true, group: true }, order: { createdAt: 'ASC', id: 'ASC' } }),
      (ids) => configs.find({ where: { id: In(ids) }, relations: { image: true, group: true } }));
  }

  async get(castConfigId: string): Promise<CastConfig> {
    const id = parseId(castConfigId);
    const config = id ? await this.db.getRepository(CastConfig).findOne({ where: { id }, relations: { image: true, group: true } }) : null;
    if (!config) throw ApiError.invalidId('cast_config_id', castConfigId);
    return config;
  }

  async findByKey(key: string): Promise<CastConfig | null> {
    return this.db.getRepository(CastConfig).findOne({ where: { key }, relations: { image: true } });
  }

  async create(fields: NewCastConfig): Promise<CastConfig> {
    await this.checkLicense(fields.enable_sharing ?? defaultFlag('enable_sharing'));
    const config = this.db.getRepository(CastConfig).create({
      id: newId(), name: fields.casting_config_name, imageId: await this.imageId(fields.image_id), key: fields.key ?? randomSecret(16),
      allowedReferrers: fields.allowed_referrers ?? [], sessionRemaining: fields.session_remaining ?? CAST_DEFAULTS.sessionRemaining,
      ipRequestLimit: fields.ip_request_limit ?? CAST_DEFAULTS.ipRequestLimit, ipRequestSeconds: fields.ip_request_seconds ?? CAST_DEFAULTS.ipRequestSeconds,
      errorUrl: fields.error_url ?? null, groupId: fields.group_id ? await this.groupId(fields.group_id) : null, workspaceUrl: fields.workspace_url ?? null,
      validUntil: fields.valid_until ? parseUtcTimestamp(fields.valid_until, 'valid_until') : null,
      ...Object.fromEntries(CAST_FLAG_NAMES.map((name) => [CAST_FLAGS[name], fields[name] ?? defaultFlag(name)])),
    });
    await this.save(() => this.db.getRepository(CastConfig).save(config), config.key);
    return this.get(config.id);
  }

  async update(changes: CastConfigChanges): Promise<CastConfig> {
    await this.checkLicense(changes.enable_sharing === true);
    const config = await this.get(changes.cast_config_id);
    const set: Omit<Partial<CastConfig>, 'image' | 'group'> = {};
    if (changes.casting_config_name !== undefined) set.name = changes.casting_config_name;
    if (changes.image_id !== undefined) set.imageId = await this.imageId(changes.image_id);
    if (changes.key !== undefined) set.key = changes.key;
    if (changes.allowed_referrers !== undefined) set.allowedReferrers = changes.allowed_referrers;
    if (changes.session_remaining !== undefined) set.sessionRemaining = changes.session_remaining;
    if (changes.ip_request_limit !== undefined) set.ipRequestLimit = changes.ip_request_limit;
    if (changes.ip_request_seconds !== undefined) set.ipRequestSeconds = changes.ip_request_seconds;
    if (changes.error_url !== undefined) set.errorUrl = changes.error_url;
    if (changes.workspace_url !== undefined) set.workspaceUrl = changes.workspace_url;
    if (changes.group_id !== undefined) set.groupId = changes.group_id === null ? null : await this.groupId(changes.group_id);
    if (changes.valid_until !== undefined) set.validUntil = changes.valid_until === null ? null : parseUtcTimestamp(changes.valid_until, 'valid_until');
    for (const name of CAST_FLAG_NAMES) {
      const value = changes[name];
      if (value !== undefined) Object.assign(set, { [CAST_FLAGS[name]]: value });
    }
    if (Object.keys(set).length > 0) await this.save(() => this.db.getRepository(CastConfig).update({ id: config.id }, set), set.key ?? config.key);
    return this.get(config.id);
  }

  async delete(castConfigId: string): Promise<void> {
    const config = await this.get(castConfigId);
    await this.db.getRepository(CastConfig).delete({ id: config.id });
  }

  private async checkLicense(turnsSharingOn: boolean): Promise<void> {
    await this.entitlements.assertFeature('session_casting', 'Session casting');
    if (turnsSharingOn) await this.entitlements.assertFeature('session_sharing', 'Workspace sharing');
  }

  private async save(write: () => Promise<unknown>, key: string): Promise<void> {
    try {
      await write();
    } catch (err) {
      if (err instanceof QueryFailedError && (err.driverError as { code?: string }).code === UNIQUE_VIOLATION) {
        throw new ApiError(ErrorCode.Conflict, `key (${key}) is already used by another casting config`);
      }
      throw err;
    }
  }

  private async imageId(ref: string): Promise<string> {
    const id = parseId(ref);
    const image = id ? await this.db.getRepository(Image).findOneBy({ id }) : null;
    if (!image) throw ApiError.invalidId('image_id', ref);
    return image.id;
  }

  private async groupId(ref: string): Promise<string> {
    const id = parseId(ref);
    const group = id ? await this.db.getRepository(Group).findOneBy({ id }) : null;
    if (!group) throw ApiError.invalidId('group_id', ref);
    return group.id;
  }
}
