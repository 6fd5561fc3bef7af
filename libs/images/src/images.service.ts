import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, In, QueryFailedError, Repository } from 'typeorm';
import { addressList, ApiError, AppConfig, ErrorCode, newId, parseId } from '@ws/common';
import { creationOrder, findByRef, hydrate, KeysetList, listPage, PageAnswer, PageRequest, rawQuery, selectColumns } from '@ws/database';
import { ExecConfig, Image, ImageAttribute } from './image.entity';
import { checkImageLaunchSettings, checkImagePermissions } from './image-settings';

/** PostgreSQL: a row still refers to the one being deleted (workspaces keep their image, ON DELETE RESTRICT). */
const FOREIGN_KEY_VIOLATION = '23503';
const IMAGES_LIST: KeysetList = { name: 'images', from: 'images i', keys: creationOrder('i') };

export interface ImageDefinition {
  name: string;
  friendlyName: string;
  description?: string;
  imageSrc?: string;
  cores?: number;
  memory?: number;
  xRes?: number;
  yRes?: number;
  enabled?: boolean;
  isBrowser?: boolean;
  /** name → "<port>/tcp", e.g. { vnc: '5900/tcp' }. */
  portMap?: Record<string, string>;
  execConfig?: ExecConfig;
  restrictToZone?: boolean;
  zoneId?: string | null;
  restrictToServer?: boolean;
  serverId?: string | null;
  persistentProfilePath?: string | null;
  /** Checked subset of docker run options (README "Image launch settings"). */
  runConfig?: Record<string, unknown>;
  /** `{ "<host path or volume>": { bind, mode } }` with {username}, {user_id}, {image_id} templates. */
  volumeMappings?: Record<string, unknown>;
  /** Inherit (the server's), Quotas or Shares. */
  cpuAllocationMethod?: string;
  /** Docker networks a cast link with dynamic_container_network lets its visitor choose from. */
  selectableNetworks?: string[];
  /** Its containers join networkName (an operator's Docker network) instead of the isolated workspace network. */
  restrictToNetwork?: boolean;
  networkName?: string | null;
}

/** Who saves: an API caller passes its permissions; the operator's CLI passes nothing (it holds them all). */
export interface ImageSaveOptions {
  permissions?: readonly string[];
}

/** ImageDefinition field → the wire name the permission rule (image-settings.ts) speaks of. */
const WIRE_NAMES: Partial<Record<keyof ImageDefinition, string>> = {
  cores: 'cores', memory: 'memory', cpuAllocationMethod: 'cpu_allocation_method', volumeMappings: 'volume_mappings', runConfig: 'run_config', execConfig: 'exec_config',
  selectableNetworks: 'selectable_networks',
};

const PORT_SPEC = /^(\d{1,5})\/(tcp|udp)$/;
/** A user-defined Docker network's name; `host`, `none` and container:<id> modes are never selectable. */
const NETWORK_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const UNSELECTABLE_NETWORKS = new Set(['host', 'none']);

/** The image catalog: what workspaces can be made from. */
@Injectable()
export class ImagesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(Image) private readonly images: Repository<Image>,
    private readonly config: AppConfig,
  ) {}

  list(): Promise<Image[]> {
    return this.images.find({ relations: { attributes: true }, order: { friendlyName: 'ASC' } });
  }

  /** get_images: the whole catalog by name, or one page of it in creation order (`limit`, `cursor`; decisions). */
  listPaged(request: PageRequest): Promise<{ rows: Image[]; paging: PageAnswer }> {
    return listPage(this.db, IMAGES_LIST, request, () => this.list(), (ids) => this.images.find({ where: { id: In(ids) }, relations: { attributes: true } }));
  }

  /**
   * One image with its attributes, as TypeORM's findOne with that relation loads it but in one raw statement: every
   * launch starts here, and the find costs two statements (a DISTINCT pass, then the join) and their query building.
   */
  async find(imageId: string): Promise<Image> {
    const id = parseId(imageId);
    const image = id ? await loadImage(this.db, id) : null;
    if (!image) throw ApiError.invalidId('image_id', imageId);
    return image;
  }

  findByRef(ref: string): Promise<Image> {
    return findByRef(this.images, ref, 'friendlyName', 'image', { attributes: true });
  }

  /**
   * Creates or updates (by friendly name) an image with its port map. Launch settings outside the allowed
   * subset are refused (400 naming the key); a caller without Images Modify Resources cannot set resource fields.
   */
  async upsert(definition: ImageDefinition, options: ImageSaveOptions = {}): Promise<Image> {
    checkImageLaunchSettings(definition.friendlyName, definition, addressList(this.config.WORKSPACE_SECURITY_OPTS_ALLOWED));
    for (const [name, spec] of Object.entries(definition.portMap ?? {})) {
      const match = PORT_SPEC.exec(spec);
      if (!/^[a-z_]{1,32}$/.test(name) || !match || Number(match[1]) < 1 || Number(match[1]) > 65535) {
        throw new ApiError(ErrorCode.InvalidRequest, `Invalid port map entry ${name}=${spec}; expected name=<port>/tcp`);
      }
    }
    for (const network of definition.selectableNetworks ?? []) {
      if (!NETWORK_NAME.test(network) || UNSELECTABLE_NETWORKS.has(network)) {
        throw new ApiError(ErrorCode.InvalidRequest, `selectable_networks: ${network} is not a selectable Docker network (a network name; not host or none)`);
      }
    }
    if (definition.networkName && (!NETWORK_NAME.test(definition.networkName) || UNSELECTABLE_NETWORKS.has(definition.networkName))) {
      throw new ApiError(ErrorCode.InvalidRequest, `network_name: ${definition.networkName} is not a usable Docker network (a network name; not host or none)`);
    }
    return this.db.transaction(async (tx) => {
      const existing = await tx.findOneBy(Image, { friendlyName: definition.friendlyName });
      checkNetworkRestriction(definition, existing);
      if (options.permissions) checkImagePermissions(wireFieldsOf(definition), !existing, options.permissions);
      const { portMap, ...fields } = definition;
      const id = existing?.id ?? newId();
      await tx.save(Image, { ...(existing ?? {}), ...fields, id });
      if (portMap) {
        await tx.delete(ImageAttribute, { imageId: id, category: 'port_map' });
        for (const [name, value] of Object.entries(portMap)) {
          await tx.insert(ImageAttribute, { id: newId(), imageId: id, category: 'port_map', name, value });
        }
      }
      return tx.findOneOrFail(Image, { where: { id }, relations: { attributes: true } });
    });
  }

  /** Changes only the given fields of an image (by id or friendly name), checked as upsert checks them. */
  async update(ref: string, changes: Partial<ImageDefinition>, options: ImageSaveOptions = {}): Promise<Image> {
    const image = await this.findByRef(ref);
    const given = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined)) as Partial<ImageDefinition>;
    return this.upsert({ ...given, name: given.name ?? image.name, friendlyName: image.friendlyName }, options).then(async (saved) => {
      if (given.friendlyName && given.friendlyName !== image.friendlyName) {
        await this.images.update({ id: saved.id }, { friendlyName: given.friendlyName });
        return this.images.findOneOrFail({ where: { id: saved.id }, relations: { attributes: true } });
      }
      return saved;
    });
  }

  /**
   * Removes an image no workspace ever used. One that workspaces used (running or in their history, recordings
   * included) is kept and disabled instead: those rows refer to it, and no new workspace starts from it.
   */
  async remove(ref: string): Promise<'removed' | 'disabled'> {
    const image = await this.findByRef(ref);
    try {
      await this.images.delete({ id: image.id });
      return 'removed';
    } catch (err) {
      if (!(err instanceof QueryFailedError) || (err.driverError as { code?: string }).code !== FOREIGN_KEY_VIOLATION) throw err;
      await this.images.update({ id: image.id }, { enabled: false });
      return 'disabled';
    }
  }
}

/** name → container port from the image's port_map attributes; vnc 5900/tcp when none is given. */
export function portMapOf(image: Pick<Image, 'attributes'>): Record<string, string> {
  const entries = (image.attributes ?? []).filter((a) => a.category === 'port_map').map((a) => [a.name, a.value] as const);
  return entries.length ? Object.fromEntries(entries) : { vnc: '5900/tcp' };
}

function wireFieldsOf(definition: Partial<ImageDefinition>): string[] {
  return Object.entries(definition)
    .filter(([, v]) => v !== undefined)
    .map(([k]) => WIRE_NAMES[k as keyof ImageDefinition] ?? k);
}

/**
 * restrict_to_network needs a network_name; and a cast visitor of a restricted image may choose only that network
 * (the image's restriction wins), so its selectable_networks list nothing else. Checked on the saved result.
 */
function checkNetworkRestriction(definition: Partial<ImageDefinition>, existing: Image | null): void {
  const restricted = definition.restrictToNetwork ?? existing?.restrictToNetwork ?? false;
  if (!restricted) return;
  const networkName = definition.networkName !== undefined ? definition.networkName : existing?.networkName ?? null;
  const label = definition.friendlyName ?? existing?.friendlyName;
  if (!networkName) throw new ApiError(ErrorCode.InvalidRequest, `Image ${label}: restrict_to_network needs a network_name`);
  const others = (definition.selectableNetworks ?? existing?.selectableNetworks ?? []).filter((n) => n !== networkName);
  if (others.length) {
    throw new ApiError(ErrorCode.InvalidRequest, `Image ${label} is restricted to the network ${networkName}; selectable_networks may not list ${others.join(', ')}`);
  }
}

/** The image `id` with its attributes (a row per attribute), hydrated as TypeORM would; null when there is none. */
async function loadImage(db: DataSource, id: string): Promise<Image | null> {
  const rows = await rawQuery(
    db,
    `SELECT ${selectColumns(db, Image, 'i', 'i_')}, ${selectColumns(db, ImageAttribute, 'a', 'a_')}
       FROM images i LEFT JOIN image_attributes a ON a.image_id = i.id WHERE i.id = $1`,
    [id],
  );
  const image = rows.length ? hydrate(db, Image, rows[0], 'i_') : null;
  if (!image) return null;
  image.attributes = [];
  for (const row of rows) {
    const attribute = hydrate(db, ImageAttribute, row, 'a_');
    if (attribute) image.attributes.push(attribute);
  }
  return image;
}
