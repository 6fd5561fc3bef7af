import { Injectable, Logger } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { DockerHosts, EngineImage } from '@ws/agent';
import { Server } from './server.entity';
import { ServerImage } from './server-image.entity';

/** The references an image name can match in an inventory: `name` as given, and `name:latest` for an untagged one. */
export function inventoryReferencesOf(name: string): string[] {
  const refs = [name];
  const lastPart = name.slice(name.lastIndexOf('/') + 1);
  if (!name.startsWith('sha256:') && !lastPart.includes(':') && !name.includes('@')) refs.push(`${name}:latest`);
  return refs;
}

/**
 * Which images each server's engine holds (table server_images), taken by the worker's health round for every server
 * that answers, by `server add`/`server ensure-local` and after an image is copied to a server. A server whose
 * inventory was never taken (`images_checked_at` null) is assumed to hold any image, as before issue 24.
 */
@Injectable()
export class ServerInventory {
  private readonly logger = new Logger(ServerInventory.name);

  constructor(
    @InjectRepository(ServerImage) private readonly rows: Repository<ServerImage>,
    @InjectRepository(Server) private readonly servers: Repository<Server>,
    private readonly hosts: DockerHosts,
  ) {}

  /** Lists the server's images and replaces its inventory with them; answers how many references it holds. */
  async refresh(server: Server): Promise<number> {
    return this.record(server, await this.hosts.get(server).listImages());
  }

  /** Replaces the server's inventory with `images` in one transaction. */
  async record(server: Server, images: EngineImage[]): Promise<number> {
    const entries = new Map<string, string>();
    for (const image of images) {
      entries.set(image.id, image.id);
      for (const tag of image.tags) entries.set(tag, image.id);
    }
    await this.rows.manager.transaction(async (tx) => {
      // One inventory write per server at a time (a health round and a CLI copy can meet); the server row stays free.
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`server_images:${server.id}`]);
      await tx.delete(ServerImage, { serverId: server.id });
      const now = new Date();
      const batch = [...entries].map(([reference, imageId]) => ({ serverId: server.id, reference, imageId, seenAt: now }));
      for (let i = 0; i < batch.length; i += 500) await tx.insert(ServerImage, batch.slice(i, i + 500));
      await tx.update(Server, { id: server.id }, { imagesCheckedAt: now });
    });
    return entries.size;
  }

  /** Best effort (a server that does not answer keeps its last inventory); logs what failed. */
  async refreshQuietly(server: Server): Promise<void> {
    await this.refresh(server).catch((err: Error) => this.logger.warn(`image inventory of ${server.hostname} not taken: ${err.message}`));
  }

  /** Refreshes every enabled server (best effort each). */
  async refreshAll(): Promise<void> {
    const servers = await this.servers.find({ where: { enabled: true } });
    await Promise.all(servers.map((s) => this.refreshQuietly(s)));
  }

  /** Hostnames of servers whose inventory lists the image (by reference). */
  async holders(imageName: string): Promise<Server[]> {
    const rows = await this.rows.find({ where: inventoryReferencesOf(imageName).map((reference) => ({ reference })), relations: { server: true } });
    const byId = new Map(rows.map((r) => [r.serverId, r.server as Server]));
    return [...byId.values()];
  }
}
