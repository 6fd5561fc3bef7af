import { randomUUID } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline, Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { DockerHost } from '@ws/agent';
import { AppConfig } from '@ws/common';
import { FileObjectStore, HashingStream, ObjectStore, openStore, putVerified, S3ObjectStore } from '@ws/storage';
import { PersistentProfile } from './persistent-profile.entity';
import { GENERATION_KEY } from './profile-location';
import { ProfileMeter } from './profile-meter';

const MIB = 1024 * 1024;
/** A file store's .tmp entry untouched this long is a killed upload's leftover (a live upload writes every chunk). */
const STALE_TEMP_MS = 10 * 60_000;
/** Bound of one archive copy into a container beyond what the bandwidth cap itself takes. */
const ARCHIVE_COPY_BASE_MS = 10 * 60_000;

/** Where a profile is read from or written to: a directory of a workspace's container. */
export interface ProfileContainer {
  host: DockerHost;
  containerId: string;
  /** Absolute path of the profile directory (the user's home), e.g. /home/workspace. */
  directory: string;
}

export type SaveOutcome = { saved: true; size: number; objectKey: string } | { saved: false; tooLarge: true; bytes: number; maxBytes: number };

/**
 * Loads, resets and saves persistent profiles. A profile lives at its location (a store url) as generations
 * `<uuid>.tar` plus one PersistentProfile row pointing at the current one. A save never touches the current
 * generation before the new one is verified and the pointer switched (see save).
 */
@Injectable()
export class ProfileSync {
  private readonly logger = new Logger(ProfileSync.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {}

  pointer(location: string): Promise<PersistentProfile | null> {
    return this.db.getRepository(PersistentProfile).findOneBy({ location });
  }

  /** The profile's size when one is saved (an estimate of the next save's size). */
  async savedSize(location: string): Promise<number | null> {
    return (await this.pointer(location))?.size ?? null;
  }

  /** Mode Reset: the pointer goes first (so nothing restores a half-deleted profile), then every generation. */
  async reset(location: string): Promise<void> {
    await this.db.getRepository(PersistentProfile).delete({ location });
    await this.withStore(location, (store) => this.deleteGenerations(store, location, new Date(8.64e15), null));
  }

  /**
   * Mode Enabled: streams the current generation into the container's profile directory's parent (the tar
   * holds the directory itself), checking its SHA-256 on the way. Answers false when there is none (the
   * workspace starts with the image's home). Repeatable: a second copy overwrites the same files.
   */
  async restore(location: string, target: ProfileContainer, onProgress?: (bytes: number, total: number) => void): Promise<boolean> {
    const pointer = await this.pointer(location);
    if (!pointer) return false;
    await this.withStore(location, async (store) => {
      const source = await store.get(pointer.objectKey);
      const rate = this.bytesPerSecond();
      const hasher = new HashingStream();
      const meter = new ProfileMeter({ bytesPerSecond: rate, onProgress: onProgress && ((bytes) => onProgress(bytes, pointer.size)) });
      const body = pipeline(source, hasher, meter, () => undefined) as Readable;
      const timeoutMs = ARCHIVE_COPY_BASE_MS + (rate ? (pointer.size / rate) * 1000 : 0);
      await target.host.putArchive(target.containerId, parentOf(target.directory), body, timeoutMs);
      if (hasher.byteCount !== pointer.size || hasher.digest() !== pointer.sha256) {
        throw new Error(`The saved persistent profile ${location}/${pointer.objectKey} does not match its checksum (${hasher.byteCount} bytes read, ${pointer.size} recorded)`);
      }
    });
    return true;
  }

  /**
   * Archives the container's profile directory (the container should be stopped) and makes it the current
   * generation: the tar streams through a byte counter (PROFILE_MAX_MB) and the bandwidth cap into a NEW object,
   * which putVerified checks (size and SHA-256 read back); only then is the pointer switched, in one transaction;
   * after commit the previous generation is deleted (a failure there leaves an orphan, logged). Too large: the
   * partial object is deleted and the previous generation stays. Any other failure throws, with the previous
   * generation and the pointer untouched; the caller retries.
   */
  async save(location: string, source: ProfileContainer, workspaceId: string, onProgress?: (bytes: number) => void): Promise<SaveOutcome> {
    const maxBytes = this.config.PROFILE_MAX_MB * MIB;
    return this.withStore(location, async (store) => {
      await sweepStaleTemp(store).catch((err: Error) => this.logger.warn(`${location}: could not sweep stale temporary files: ${err.message}`));
      const key = `${randomUUID()}.tar`;
      const started = new Date();
      const archive = await source.host.getArchive(source.containerId, source.directory);
      const meter = new ProfileMeter({ maxBytes, bytesPerSecond: this.bytesPerSecond(), onProgress });
      const body = pipeline(archive, meter, () => undefined) as Readable;
      let written;
      try {
        written = await putVerified(store, key, body, {}, { contentType: 'application/x-tar', metadata: { workspace: workspaceId.replace(/-/g, '') } });
      } catch (err) {
        archive.destroy();
        await store.delete(key).catch(() => undefined);
        if (meter.exceeded) return { saved: false, tooLarge: true, bytes: meter.bytes, maxBytes } as const;
        throw err;
      }
      await this.db.getRepository(PersistentProfile).upsert(
        { location, objectKey: key, size: written.size, sha256: written.sha256, savedAt: new Date(), savedByWorkspaceId: workspaceId }, ['location'],
      );
      // After the switch: the previous generation, and any a killed save completed but never switched to, are
      // nobody's. A failure here only leaves an orphan for the next save.
      await this.deleteGenerations(store, location, started, key).catch((err: Error) => this.logger.warn(`${location}: old profile generations left behind: ${err.message}`));
      return { saved: true, size: written.size, objectKey: key } as const;
    });
  }

  /**
   * Deletes the generations in the store written before `before` (stores may round times down), except `keep`
   * and the one the pointer names when it is read after listing. One workspace writes a location at a time; the
   * guards keep even a zombie save (a worker that lost its job but still runs) from deleting a newer save's
   * current generation.
   */
  private async deleteGenerations(store: ObjectStore, location: string, before: Date, keep: string | null): Promise<void> {
    const doomed: string[] = [];
    for await (const object of store.list('')) {
      if (GENERATION_KEY.test(object.key) && object.lastModified < before) doomed.push(object.key);
    }
    const current = (await this.pointer(location))?.objectKey;
    for (const key of doomed) if (key !== current && key !== keep) await store.delete(key);
  }

  private bytesPerSecond(): number {
    return this.config.PROFILE_SYNC_MAX_MBPS * MIB;
  }

  /** Opens the store at `location` for one operation (an S3 client's sockets are closed after). */
  private async withStore<T>(location: string, use: (store: ObjectStore) => Promise<T>): Promise<T> {
    const store = openStore(location, this.config);
    try {
      return await use(store);
    } finally {
      if (store instanceof S3ObjectStore) store.close();
    }
  }
}

/** The directory an archive of `directory` is extracted into (its entries start with the last segment). */
export function parentOf(directory: string): string {
  const parent = directory.replace(/\/+$/, '').replace(/\/[^/]*$/, '');
  return parent || '/';
}

/**
 * A killed upload to a file:// store leaves its .tmp file behind; only one workspace writes a location at a
 * time (the exclusivity rule), so an old temporary file there is nobody's. (An S3 upload killed midway leaves an
 * incomplete multipart upload, which only the bucket's lifecycle rule removes; see docs.)
 */
async function sweepStaleTemp(store: ObjectStore): Promise<void> {
  if (!(store instanceof FileObjectStore)) return;
  const dir = join(store.root, '.tmp');
  const entries = await readdir(dir).catch(() => [] as string[]);
  const before = Date.now() - STALE_TEMP_MS;
  for (const name of entries.slice(0, 10_000)) {
    const path = join(dir, name);
    const info = await stat(path).catch(() => null);
    if (info && info.isFile() && info.mtimeMs < before) await rm(path, { force: true });
  }
}
