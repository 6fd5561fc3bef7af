import { randomBytes, randomUUID } from 'node:crypto';
import { constants as fsConstants, createReadStream, createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HashingStream, hashStream } from './hashing';
import { validateKey, validatePrefix } from './keys';
import { ByteRange, InvalidKeyError, ObjectInfo, ObjectNotFoundError, ObjectStore, ObjectSummary, PutFileOptions, PutFileResult, PutOptions, PutResult } from './object-store';
import { downloadPath, signDownload } from './signing';

/** Kept beside each object under .meta/: what head answers without reading the object. */
interface Sidecar {
  size: number;
  mtimeMs: number;
  /** Absent for a putFile without hashing until head first computes it. */
  sha256?: string;
  contentType?: string;
  metadata: Record<string, string>;
}

/**
 * The embedded store: objects are files under `root`. A put streams to .tmp/, fsyncs, then renames into place
 * (atomic on one filesystem); keys are validated and resolved strictly inside the root. Download links are
 * HMAC-signed and served by the api's /api/storage route.
 */
export class FileObjectStore implements ObjectStore {
  readonly kind = 'file' as const;
  readonly root: string;
  private secret: Promise<Buffer> | null = null;

  constructor(
    root: string,
    private readonly options: { publicBaseUrl: string; signingSecret?: string },
  ) {
    this.root = resolve(root);
  }

  /** The absolute path of `key`'s file; refuses any key that would resolve outside the root. */
  pathOf(key: string): string {
    validateKey(key);
    const path = resolve(this.root, key);
    if (!path.startsWith(this.root + sep)) throw new InvalidKeyError(`Invalid object key ${JSON.stringify(key)}: outside the store`);
    return path;
  }

  private sidecarPath(key: string): string {
    return join(this.root, '.meta', `${key}.json`);
  }

  async put(key: string, body: Readable, options: PutOptions = {}): Promise<PutResult> {
    const target = this.pathOf(key);
    const tmpDir = join(this.root, '.tmp');
    await mkdir(tmpDir, { recursive: true });
    const tmp = join(tmpDir, randomUUID());
    const hasher = new HashingStream();
    try {
      await pipeline(body, hasher, createWriteStream(tmp, { mode: 0o640 }));
      await fsyncPath(tmp);
      const written = await stat(tmp);
      const sha256 = hasher.digest();
      const sidecar: Sidecar = { size: hasher.byteCount, mtimeMs: written.mtimeMs, sha256, contentType: options.contentType, metadata: options.metadata ?? {} };
      await writeFile(`${tmp}.json`, JSON.stringify(sidecar), { mode: 0o640 });
      await fsyncPath(`${tmp}.json`);
      await mkdir(dirname(target), { recursive: true });
      await mkdir(dirname(this.sidecarPath(key)), { recursive: true });
      await rename(tmp, target);
      // The sidecar follows the data; until it lands, head sees a stale sidecar (mtime differs) and hashes the file.
      await rename(`${tmp}.json`, this.sidecarPath(key));
      await fsyncPath(dirname(target));
      return { key, size: hasher.byteCount, sha256, etag: sha256 };
    } catch (err) {
      await rm(tmp, { force: true });
      await rm(`${tmp}.json`, { force: true });
      throw err;
    }
  }

  /**
   * Renames the file into place when it is on the store's filesystem (no copy, no read back): fsyncs it, renames
   * it, fsyncs the directory. Else copies it through .tmp/ like put and removes it. The sidecar is written without
   * fsync: one lost in a crash is recomputed by head (losing only the content type and metadata).
   */
  async putFile(key: string, path: string, options: PutFileOptions = {}): Promise<PutFileResult> {
    const target = this.pathOf(key);
    await mkdir(dirname(target), { recursive: true });
    await mkdir(dirname(this.sidecarPath(key)), { recursive: true });
    const tmpDir = join(this.root, '.tmp');
    await mkdir(tmpDir, { recursive: true });
    const tmp = join(tmpDir, randomUUID());
    try {
      const source = await open(path, 'r');
      let sha256: string | undefined;
      try {
        if (options.hash !== false) sha256 = (await hashStream(source.createReadStream({ autoClose: false, start: 0 }))).sha256;
        await source.chmod(0o640);
        await source.sync();
      } finally {
        await source.close();
      }
      let moved = true;
      await rename(path, target).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EXDEV') throw err;
        moved = false;
      });
      if (!moved) {
        // Another filesystem: a copy (a reflink where the filesystem has them), made whole in .tmp/ first.
        await copyFile(path, tmp, fsConstants.COPYFILE_FICLONE);
        await fsyncPath(tmp);
        await rename(tmp, target);
      }
      const stored = await stat(target);
      const sidecar: Sidecar = { size: stored.size, mtimeMs: stored.mtimeMs, sha256, contentType: options.contentType, metadata: options.metadata ?? {} };
      await writeFile(`${tmp}.json`, JSON.stringify(sidecar), { mode: 0o640 });
      await rename(`${tmp}.json`, this.sidecarPath(key));
      await fsyncPath(dirname(target));
      if (!moved) await rm(path, { force: true });
      return { key, size: stored.size, sha256 };
    } catch (err) {
      await rm(tmp, { force: true });
      await rm(`${tmp}.json`, { force: true });
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const path = this.pathOf(key);
    const handle = await open(path, 'r').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'EISDIR' || err.code === 'ENOTDIR') throw new ObjectNotFoundError(key);
      throw err;
    });
    if ((await handle.stat()).isDirectory()) {
      await handle.close();
      throw new ObjectNotFoundError(key);
    }
    // The open handle keeps reading the object it opened even if a put replaces the file meanwhile.
    return handle.createReadStream({ start: range?.start, end: range?.end });
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const path = this.pathOf(key);
    const stats = await stat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw err;
    });
    if (!stats || !stats.isFile()) return null;
    let sidecar = await readFile(this.sidecarPath(key), 'utf8').then((text) => JSON.parse(text) as Sidecar, () => null);
    const current = sidecar !== null && sidecar.size === stats.size && sidecar.mtimeMs === stats.mtimeMs;
    if (!current || sidecar?.sha256 === undefined) {
      const { sha256 } = await hashStream(createReadStream(path));
      const known = current ? sidecar : null;
      sidecar = { size: stats.size, mtimeMs: stats.mtimeMs, sha256, contentType: known?.contentType, metadata: sidecar?.metadata ?? {} };
      // Kept for the next head when the object was put without a hash (a stale sidecar is left to the next put).
      if (known) await this.rewriteSidecar(key, sidecar).catch(() => undefined);
    }
    const sha256 = sidecar.sha256 as string;
    return { key, size: stats.size, etag: sha256, sha256, lastModified: stats.mtime, contentType: sidecar.contentType, metadata: sidecar.metadata };
  }

  private async rewriteSidecar(key: string, sidecar: Sidecar): Promise<void> {
    const tmp = join(this.root, '.tmp', `${randomUUID()}.json`);
    await mkdir(dirname(tmp), { recursive: true });
    await writeFile(tmp, JSON.stringify(sidecar), { mode: 0o640 });
    await rename(tmp, this.sidecarPath(key)).catch(async (err) => {
      await rm(tmp, { force: true });
      throw err;
    });
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    await rm(path, { force: true });
    await rm(this.sidecarPath(key), { force: true });
  }

  async *list(prefix: string): AsyncIterable<ObjectSummary> {
    validatePrefix(prefix);
    // Start at the deepest directory the prefix names, so listing one user's profiles does not walk the store.
    const start = prefix.includes('/') ? join(this.root, prefix.slice(0, prefix.lastIndexOf('/'))) : this.root;
    const pending = [start];
    while (pending.length) {
      const dir = pending.pop() as string;
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        if (entry.name.startsWith('.')) continue; // .tmp, .meta, .signing-key: never keys
        const path = join(dir, entry.name);
        const key = relative(this.root, path).split(sep).join('/');
        if (entry.isDirectory()) {
          if (key.startsWith(prefix) || prefix.startsWith(`${key}/`)) pending.push(path);
        } else if (entry.isFile() && key.startsWith(prefix)) {
          const stats = await stat(path).catch(() => null);
          if (stats) yield { key, size: stats.size, lastModified: stats.mtime };
        }
      }
    }
  }

  async signedDownloadUrl(key: string, ttlSeconds: number): Promise<string> {
    validateKey(key);
    const expiresAt = Math.floor(Date.now() / 1000) + Math.max(1, Math.floor(ttlSeconds));
    const signature = signDownload(await this.signingSecret(), key, expiresAt);
    return `${this.options.publicBaseUrl}${downloadPath(key)}?expires=${expiresAt}&signature=${signature}`;
  }

  /**
   * STORAGE_SIGNING_SECRET when set; else a random key kept in the store's root (.signing-key, mode 0600), made
   * once by whichever process needs it first. A file store is shared by the api and worker of a host, so both
   * read the same key without further configuration.
   */
  signingSecret(): Promise<Buffer> {
    this.secret ??= this.loadSecret().catch((err) => {
      this.secret = null;
      throw err;
    });
    return this.secret;
  }

  private async loadSecret(): Promise<Buffer> {
    if (this.options.signingSecret) return Buffer.from(this.options.signingSecret, 'utf8');
    const path = join(this.root, '.signing-key');
    await mkdir(this.root, { recursive: true });
    if (!(await stat(path).catch(() => null))) {
      // Written whole under another name, then linked: a concurrent reader never sees a half-written key.
      const tmp = join(this.root, `.signing-key.${randomUUID()}`);
      await writeFile(tmp, randomBytes(32).toString('hex'), { mode: 0o600 });
      await link(tmp, path).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      await rm(tmp, { force: true });
    }
    const text = (await readFile(path, 'utf8')).trim();
    if (!/^[0-9a-f]{64}$/.test(text)) throw new Error(`${path} is not a 64-digit hex key`);
    return Buffer.from(text, 'hex');
  }
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
