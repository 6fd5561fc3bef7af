import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import * as tar from 'tar-stream';
import { ContainerPathNotFoundError, DockerHost, DockerHosts } from '@ws/agent';
import { ApiError, AppConfig, ErrorCode, formatTimestamp } from '@ws/common';
import type { Server } from '@ws/servers';
import { agentFailure, withOverride, Workspace, WorkspaceAccess, WorkspacesService } from '@ws/workspaces';
import { DISCARD_UPLOAD, FINISH_UPLOAD, LIST_DOWNLOADS, LOCATE_DOWNLOAD, PREPARE_UPLOADS } from './container-scripts';
import { checkFileName, isTransferableName } from './file-names';

const MiB = 1024 * 1024;
const EXEC_TIMEOUT_MS = 30_000;
/** A slow link still finishes: the archive call may take a minute plus a second per 256 KiB. */
const TRANSFER_BASE_MS = 60_000;
const TRANSFER_BYTES_PER_SECOND = 256 * 1024;

export type FileDirection = 'upload' | 'download';

/** A running workspace whose owner may move files in the direction asked. */
export interface FileTarget {
  workspace: Workspace;
  host: DockerHost;
  containerId: string;
  server: Server;
}

export interface DownloadEntry {
  name: string;
  size: number;
  mtime: string;
}

export interface DownloadStream {
  name: string;
  size: number;
  body: Readable;
}

/**
 * In-session file transfer: uploads into ~/Uploads and downloads from ~/Downloads of a workspace's container
 * through Docker's archive API (nothing runs in the image but sh for the small checks), streamed both ways.
 */
@Injectable()
export class WorkspaceFiles {
  private readonly logger = new Logger(WorkspaceFiles.name);

  constructor(
    private readonly access: WorkspaceAccess,
    private readonly workspaces: WorkspacesService,
    private readonly hosts: DockerHosts,
    private readonly config: AppConfig,
  ) {}

  /**
   * The owner's stream session (the cookie the connect call set) for a running workspace whose effective client
   * settings (group settings, or a cast config's enforced ones) allow the direction; view-only joiners never.
   */
  async authorize(jwt: string | null, workspaceWireId: string, direction: FileDirection): Promise<FileTarget> {
    if (!jwt) throw new ApiError(ErrorCode.Unauthenticated, 'No session: open the workspace link first');
    const grant = await this.access.authorizeStream(jwt, workspaceWireId);
    if (grant.viewOnly) throw new ApiError(ErrorCode.Forbidden, `Only the workspace's owner may ${direction} files`);
    const { workspace } = grant;
    const settings = withOverride((await this.workspaces.settingsFor(workspace.userId as string)).clientSettings, workspace);
    const allowed = direction === 'upload' ? settings.allow_workspace_uploads : settings.allow_workspace_downloads;
    if (!allowed) throw new ApiError(ErrorCode.Forbidden, `This workspace's settings do not allow ${direction}s (allow_workspace_${direction}s)`);
    if (workspace.serverConnection) {
      const { protocol, host, port } = workspace.serverConnection;
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceWireId}) reaches the ${protocol.toUpperCase()} server ${host}:${port}; files move only to and from container workspaces`);
    }
    if (workspace.status !== 'running' || !workspace.server || !workspace.containerId) {
      throw new ApiError(ErrorCode.InvalidState, `Workspace (${workspaceWireId}) is not running`);
    }
    return { workspace, server: workspace.server, containerId: workspace.containerId, host: this.hosts.get(workspace.server) };
  }

  /** The size limits the client shows before it sends anything. */
  limits() {
    return { upload_max_bytes: this.config.UPLOAD_MAX_MB * MiB, download_max_bytes: this.config.DOWNLOAD_MAX_MB * MiB };
  }

  /**
   * Streams `body` (exactly `declaredLength` bytes) into ~/Uploads/<name>, owned by the container's user. The bytes
   * land under a hidden temporary name and are renamed only once complete; a body cut short, or any failure,
   * removes the temporary file, so ~/Uploads never holds a half-written file. A taken name gets a " (n)" suffix.
   */
  async upload(target: FileTarget, rawName: unknown, declaredLength: number | null, body: Readable): Promise<{ name: string; size: number }> {
    const name = checkFileName(rawName);
    if (declaredLength === null) throw new ApiError(ErrorCode.InvalidRequest, 'Send the file with a Content-Length header');
    const max = this.config.UPLOAD_MAX_MB * MiB;
    if (declaredLength > max) throw new ApiError(ErrorCode.PayloadTooLarge, `The file (${declaredLength} bytes) is larger than the upload limit (${this.config.UPLOAD_MAX_MB} MiB)`);
    const { host, containerId, server } = target;
    const prepared = await this.run(target, PREPARE_UPLOADS, {});
    if (prepared.exitCode !== 0) throw new ApiError(ErrorCode.InvalidState, 'The workspace has no writable ~/Uploads for its user');
    const [uid, gid, directory] = prepared.stdout.trim().split('\n');
    if (!/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '') || !directory?.startsWith('/')) {
      throw new ApiError(ErrorCode.InvalidState, 'The workspace did not say who its user is (id -u, id -g)');
    }

    const temp = `.ws-upload-${randomBytes(8).toString('hex')}.part`;
    const pack = tar.pack();
    const entry = pack.entry({ name: temp, type: 'file', size: declaredLength, mode: 0o644, uid: Number(uid), gid: Number(gid), mtime: new Date() }, (err) => {
      if (err) pack.destroy(err);
      else pack.finalize();
    });
    // The entry's own errors (a body cut short) end the pack, which is what putArchive reports.
    entry.on('error', () => undefined);
    const cutShort = () => new ApiError(ErrorCode.InvalidRequest, 'The upload was cut short');
    let ended = false;
    body.once('end', () => (ended = true));
    body.once('aborted', () => pack.destroy(cutShort()));
    body.once('error', () => pack.destroy(cutShort()));
    body.pipe(entry);
    try {
      await host.putArchive(containerId, directory, Readable.from(pack), TRANSFER_BASE_MS + (declaredLength / TRANSFER_BYTES_PER_SECOND) * 1000);
      if (!ended) throw cutShort();
    } catch (err) {
      body.unpipe(entry);
      pack.destroy();
      await this.discard(target, temp);
      if (!ended) throw cutShort();
      throw err instanceof ApiError ? err : agentFailure(err, server);
    }
    const finished = await this.run(target, FINISH_UPLOAD, { WS_TEMP: temp, WS_NAME: name }).catch(async (err: unknown) => {
      await this.discard(target, temp);
      throw err;
    });
    if (finished.exitCode !== 0) {
      await this.discard(target, temp);
      throw new ApiError(ErrorCode.Conflict, `Could not name the upload ${JSON.stringify(name)} in ~/Uploads (exit ${finished.exitCode})`);
    }
    return { name: finished.stdout, size: declaredLength };
  }

  /** The regular files of ~/Downloads (newest first), at most DOWNLOAD_LIST_MAX; `truncated` when there were more. */
  async listDownloads(target: FileTarget): Promise<{ files: DownloadEntry[]; truncated: boolean }> {
    const max = this.config.DOWNLOAD_LIST_MAX;
    // Each record is at most ~300 bytes (a 255-byte name plus size and time).
    const result = await this.run(target, LIST_DOWNLOADS, { WS_MAX: String(max) }, max * 320 + 1024);
    if (result.exitCode !== 0) throw new ApiError(ErrorCode.Unavailable, `Listing ~/Downloads failed (exit ${result.exitCode})`);
    let truncated = result.truncated;
    const files: DownloadEntry[] = [];
    for (const record of result.stdout.split('\0')) {
      if (record === 'more') truncated = true;
      const tab = record.indexOf('\t');
      if (tab < 0) continue;
      const [size, mtime] = record.slice(0, tab).split(' ').map(Number);
      const name = record.slice(tab + 1);
      if (!Number.isSafeInteger(size) || !Number.isFinite(mtime) || !isTransferableName(name)) continue;
      files.push({ name, size, mtime: formatTimestamp(new Date(mtime * 1000)) as string });
    }
    files.sort((a, b) => (a.mtime < b.mtime ? 1 : a.mtime > b.mtime ? -1 : a.name.localeCompare(b.name)));
    return { files: files.slice(0, max), truncated };
  }

  /**
   * ~/Downloads/<name> as a stream of exactly `size` bytes, read from Docker's archive of it (the tar is parsed
   * on the fly; its one entry's body is handed on, never buffered). Not a regular file the user may read: 404.
   * The caller must consume or destroy `body`.
   */
  async download(target: FileTarget, rawName: unknown): Promise<DownloadStream> {
    const name = checkFileName(rawName);
    const { host, containerId, server } = target;
    const located = await this.run(target, LOCATE_DOWNLOAD, { WS_NAME: name });
    const directory = located.stdout.trim();
    if (located.exitCode !== 0 || !directory.startsWith('/')) throw notFound(name);
    let archive: Readable;
    try {
      archive = await host.getArchive(containerId, `${directory === '/' ? '' : directory}/${name}`);
    } catch (err) {
      if (err instanceof ContainerPathNotFoundError) throw notFound(name);
      throw agentFailure(err, server);
    }
    const { header, body } = await firstEntry(archive).catch((err: unknown) => {
      archive.destroy();
      throw err instanceof ApiError ? err : agentFailure(err, server);
    });
    if (header.type !== 'file' || header.size === undefined) {
      body.destroy();
      throw notFound(name);
    }
    if (header.size > this.config.DOWNLOAD_MAX_MB * MiB) {
      body.destroy();
      throw new ApiError(ErrorCode.PayloadTooLarge, `The file (${header.size} bytes) is larger than the download limit (${this.config.DOWNLOAD_MAX_MB} MiB)`);
    }
    return { name, size: header.size, body };
  }

  private async run(target: FileTarget, cmd: string, environment: Record<string, string>, maxOutputBytes?: number) {
    try {
      return await target.host.exec(target.containerId, { cmd, environment, timeoutMs: EXEC_TIMEOUT_MS, ...(maxOutputBytes ? { maxOutputBytes } : {}) });
    } catch (err) {
      throw agentFailure(err, target.server);
    }
  }

  private async discard(target: FileTarget, temp: string): Promise<void> {
    await this.run(target, DISCARD_UPLOAD, { WS_TEMP: temp }).catch((err: Error) => this.logger.warn(`upload ${temp} in ${target.containerId} not removed: ${err.message}`));
  }
}

function notFound(name: string): ApiError {
  return new ApiError(ErrorCode.NotFound, `~/Downloads/${name} is not a file in this workspace`);
}

/**
 * The first entry of a tar stream: its header and a body that ends after the entry's bytes. Destroying the body
 * (or its end) releases the archive; the rest of the tar is never read.
 */
function firstEntry(archive: Readable): Promise<{ header: tar.Header; body: Readable }> {
  return new Promise((resolve, reject) => {
    const extract = tar.extract();
    let found = false;
    const release = () => {
      archive.unpipe(extract);
      archive.destroy();
      extract.destroy();
    };
    extract.once('entry', (header: tar.Header, entry: tar.Extract extends AsyncIterable<infer S> ? S : never) => {
      found = true;
      // A Node stream for the HTTP layer; it ends with the entry's last byte.
      const body = Readable.from(entry, { objectMode: false });
      body.once('close', release);
      resolve({ header, body });
    });
    const fail = (err: Error) => {
      if (found) return;
      release();
      reject(err);
    };
    extract.once('finish', () => fail(new ApiError(ErrorCode.NotFound, 'The archive held no file')));
    extract.once('error', fail);
    archive.once('error', fail);
    archive.pipe(extract);
  });
}
