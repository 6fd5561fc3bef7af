import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { ApiError, ErrorCode, newId, parseId } from '@ws/common';
import { findByRef } from '@ws/database/find-by-ref';
import { ExecConfig, Image, ImageAttribute } from './image.entity';

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
}

const PORT_SPEC = /^(\d{1,5})\/(tcp|udp)$/;

/** The image catalog: what workspaces can be made from. */
@Injectable()
export class ImagesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(Image) private readonly images: Repository<Image>,
  ) {}

  list(): Promise<Image[]> {
    return this.images.find({ relations: { attributes: true }, order: { friendlyName: 'ASC' } });
  }

  async find(imageId: string): Promise<Image> {
    const id = parseId(imageId);
    const image = id ? await this.images.findOne({ where: { id }, relations: { attributes: true } }) : null;
    if (!image) throw ApiError.invalidId('image_id', imageId);
    return image;
  }

  findByRef(ref: string): Promise<Image> {
    return findByRef(this.images, ref, 'friendlyName', 'image', { attributes: true });
  }

  /** Creates or updates (by friendly name) an image with its port map. */
  async upsert(definition: ImageDefinition): Promise<Image> {
    for (const [name, spec] of Object.entries(definition.portMap ?? {})) {
      const match = PORT_SPEC.exec(spec);
      if (!/^[a-z_]{1,32}$/.test(name) || !match || Number(match[1]) < 1 || Number(match[1]) > 65535) {
        throw new ApiError(ErrorCode.InvalidRequest, `Invalid port map entry ${name}=${spec}; expected name=<port>/tcp`);
      }
    }
    return this.db.transaction(async (tx) => {
      const existing = await tx.findOneBy(Image, { friendlyName: definition.friendlyName });
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

  async remove(ref: string): Promise<void> {
    const image = await this.findByRef(ref);
    await this.images.delete({ id: image.id });
  }
}

/** name → container port from the image's port_map attributes; vnc 5900/tcp when none is given. */
export function portMapOf(image: Image): Record<string, string> {
  const entries = (image.attributes ?? []).filter((a) => a.category === 'port_map').map((a) => [a.name, a.value] as const);
  return entries.length ? Object.fromEntries(entries) : { vnc: '5900/tcp' };
}
