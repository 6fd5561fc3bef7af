import { Transform } from 'node:stream';
import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { DockerHosts } from '@ws/agent';
import { ApiError, ErrorCode } from '@ws/common';
import { Server } from './server.entity';
import { ServerInventory } from './server-inventory';

/** A copy's progress, reported about once a second and at its end. */
export interface DistributionProgress {
  image: string;
  from: string;
  to: string;
  bytes: number;
  done: boolean;
}

export interface DistributionOutcome {
  image: string;
  source: string;
  /** Servers it was copied to. */
  copied: string[];
  /** Servers that already held it. */
  present: string[];
}

/** The longest one copy may take (a desktop image is a few hundred MB; a slow link takes minutes). */
const DEFAULT_COPY_TIMEOUT_MS = 30 * 60_000;

/**
 * Copies an image from a server whose engine holds it to others through the Docker API (issue 24, point 4): the
 * source engine's `docker save` stream piped into the target's `docker load`, no registry. One copy at a time (a
 * save stream is read once). The targets' inventories are taken again after the copy, so placement sees it at once.
 */
@Injectable()
export class ImageDistribution {
  constructor(
    @InjectRepository(Server) private readonly servers: Repository<Server>,
    private readonly hosts: DockerHosts,
    private readonly inventory: ServerInventory,
  ) {}

  /**
   * `targets`: servers by hostname or id (default every enabled server that answers its health check). Refuses a
   * target that is unknown; fails with 503 when no server that answers holds the image.
   */
  async distribute(image: string, targets: string[] = [], onProgress: (p: DistributionProgress) => void = () => undefined, copyTimeoutMs = DEFAULT_COPY_TIMEOUT_MS): Promise<DistributionOutcome> {
    if (!image.trim() || /\s/.test(image)) throw new ApiError(ErrorCode.InvalidRequest, `Invalid image reference (${image})`);
    const all = await this.servers.find({ order: { hostname: 'ASC' } });
    const named = targets.map((ref) => {
      const found = all.find((s) => s.hostname === ref || s.id === ref || s.id.replace(/-/g, '') === ref.toLowerCase());
      if (!found) throw new ApiError(ErrorCode.InvalidRequest, `Invalid server (${ref}): no such server`);
      return found;
    });
    const reachable = all.filter((s) => s.enabled && s.health !== 'down');
    // Which servers hold it, asked of each engine now (the inventory may be a period old).
    const holds = new Map<string, boolean>();
    await Promise.all([...new Set([...reachable, ...named])].map(async (s) => {
      holds.set(s.id, await this.hosts.get(s).imageExists(image).catch(() => false));
    }));
    const source = reachable.find((s) => holds.get(s.id)) ?? named.find((s) => holds.get(s.id));
    if (!source) throw new ApiError(ErrorCode.Unavailable, `Image ${image} is on no server that answers; build or load it on one first`);
    const wanted = named.length ? named : reachable;
    const outcome: DistributionOutcome = { image, source: source.hostname, copied: [], present: [] };
    for (const target of wanted) {
      if (target.id === source.id) continue;
      if (holds.get(target.id)) {
        outcome.present.push(target.hostname);
        await this.inventory.refreshQuietly(target);
        continue;
      }
      await this.copy(image, source, target, onProgress, copyTimeoutMs);
      outcome.copied.push(target.hostname);
      await this.inventory.refreshQuietly(target);
    }
    await this.inventory.refreshQuietly(source);
    return outcome;
  }

  private async copy(image: string, source: Server, target: Server, onProgress: (p: DistributionProgress) => void, timeoutMs: number): Promise<void> {
    // One bound for the whole copy: the save's answer (slow to come on a busy host) and the load.
    const deadline = Date.now() + timeoutMs;
    const tar = await this.hosts.get(source).saveImage(image, timeoutMs);
    let bytes = 0;
    let lastReport = 0;
    const report = (done: boolean) => onProgress({ image, from: source.hostname, to: target.hostname, bytes, done });
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        const now = Date.now();
        if (now - lastReport >= 1000) {
          lastReport = now;
          report(false);
        }
        callback(null, chunk);
      },
    });
    tar.on('error', (err) => counter.destroy(err));
    try {
      await this.hosts.get(target).loadImage(tar.pipe(counter), Math.max(1, deadline - Date.now()));
    } catch (err) {
      tar.destroy();
      throw new ApiError(ErrorCode.Unavailable, `Copying image ${image} from ${source.hostname} to ${target.hostname} failed: ${(err as Error).message}`);
    }
    report(true);
  }
}
