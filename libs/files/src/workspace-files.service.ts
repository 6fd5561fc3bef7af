import { randomBytes } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { Injectable } from '@nestjs/common';
import { DockerHost, DockerHosts, StreamingExec } from '@ws/agent';
import { ApiError, AppConfig, ErrorCode, formatTimestamp } from '@ws/common';
import type { Server } from '@ws/servers';
import { agentFailure, withOverride, Workspace, WorkspaceAccess, WorkspacesService } from '@ws/workspaces';
import { LIST_DOWNLOADS, PREPARE_UPLOADS, RECEIVE_UPLOAD, SCRIPT_EXIT, SEND_DOWNLOAD } from './container-scripts';
import { checkFileName, isTransferableName } from './file-names';

const MiB = 1024 * 1024;
const EXEC_TIMEOUT_MS = 30_000;
/** An upload's final name (at most 255 bytes, plus a " (n)" suffix). */
const MAX_NAME_OUTPUT = 1024;
/** A slow link still finishes: an upload may take a minute plus a second per 256 KiB. */
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
 * In-session file transfer: uploads into ~/Uploads and downloads from ~/Downloads of a workspace's container,
 * streamed both ways through small sh scripts that run as the workspace's own user (container-scripts.ts): never
 * through Docker's archive API, which runs as root and would follow the user's symlinks with root's rights.
 */
@Injectable()
export class WorkspaceFiles {
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
   * Streams `body` (exactly `declaredLength` bytes) into ~/Uploads/<name> through a process running as the
   * workspace's user, so the file is theirs and lands only where they may write. The bytes go to a hidden
   * temporary name, renamed only once complete; a body cut short, or any failure, removes the temporary file, so
   * ~/Uploads never holds a half-written file. A taken name gets a " (n)" suffix.
   */
  async upload(target: FileTarget, rawName: unknown, declaredLength: number | null, body: Readable): Promise<{ name: string; size: number }> {
    const name = checkFileName(rawName);
    if (declaredLength === null) throw new ApiError(ErrorCode.InvalidRequest, 'Send the file with a Content-Length header');
    const max = this.config.UPLOAD_MAX_MB * MiB;
    if (declaredLength > max) throw new ApiError(ErrorCode.PayloadTooLarge, `The file (${declaredLength} bytes) is larger than the upload limit (${this.config.UPLOAD_MAX_MB} MiB)`);
    const prepared = await this.run(target, PREPARE_UPLOADS, {});
    if (prepared.exitCode !== 0) throw directoryRefused('Uploads', prepared.exitCode);

    const temp = `.ws-upload-${randomBytes(8).toString('hex')}.part`;
    const receiver = await this.stream(target, RECEIVE_UPLOAD, { WS_TEMP: temp, WS_NAME: name, WS_SIZE: String(declaredLength) }, true);
    const output = readSmall(receiver.stdout, MAX_NAME_OUTPUT);
    output.catch(() => undefined); // read below, once the exit code says it is the answer
    // Whatever happens to the body, the process's stdin closes: the script then checks it got every byte.
    const closeStdin = () => {
      body.unpipe(receiver.stdin);
      receiver.stdin.end();
    };
    body.once('end', closeStdin);
    body.once('close', closeStdin);
    body.once('error', closeStdin);
    if (body.destroyed) closeStdin(); // gone while the directory was checked
    else body.pipe(receiver.stdin, { end: false });
    let exitCode: number;
    try {
      ({ exitCode } = await receiver.wait(TRANSFER_BASE_MS + (declaredLength / TRANSFER_BYTES_PER_SECOND) * 1000));
    } catch (err) {
      // Out of time: the dropped connection closes stdin, and the script removes its temporary file itself.
      body.unpipe(receiver.stdin);
      throw agentFailure(err, target.server);
    }
    // A script that stopped early (its directory changed under it) leaves the rest of the body unread: the exit
    // code, not the body, says what happened.
    if (exitCode === SCRIPT_EXIT.wrongSize) throw new ApiError(ErrorCode.InvalidRequest, 'The upload was cut short');
    if (exitCode === SCRIPT_EXIT.noName) throw new ApiError(ErrorCode.Conflict, `Could not name the upload ${JSON.stringify(name)} in ~/Uploads`);
    if (exitCode !== 0) throw directoryRefused('Uploads', exitCode);
    return { name: await output, size: declaredLength };
  }

  /** The regular files of ~/Downloads (newest first), at most DOWNLOAD_LIST_MAX; `truncated` when there were more. */
  async listDownloads(target: FileTarget): Promise<{ files: DownloadEntry[]; truncated: boolean }> {
    const max = this.config.DOWNLOAD_LIST_MAX;
    // Each record is at most ~300 bytes (a 255-byte name plus size and time).
    const result = await this.run(target, LIST_DOWNLOADS, { WS_MAX: String(max) }, max * 320 + 1024);
    if (result.exitCode !== 0) throw directoryRefused('Downloads', result.exitCode);
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
   * ~/Downloads/<name> as a stream of exactly `size` bytes, read by a process running as the workspace's user (the
   * kernel decides what it may open, symlinks included), passed on as it comes, never buffered. Not a regular file
   * the user may read: 404. The caller must consume or destroy `body`; a file that shrinks while it is sent makes
   * `body` fail rather than end short.
   */
  async download(target: FileTarget, rawName: unknown): Promise<DownloadStream> {
    const name = checkFileName(rawName);
    const maxBytes = this.config.DOWNLOAD_MAX_MB * MiB;
    const sender = await this.stream(target, SEND_DOWNLOAD, { WS_NAME: name, WS_MAX_BYTES: String(maxBytes) }, false);
    let size: number | null;
    try {
      size = await readSizeLine(sender.stdout, EXEC_TIMEOUT_MS);
    } catch (err) {
      sender.close();
      throw agentFailure(err, target.server);
    }
    if (size === null) {
      // No size line: the script refused; its exit code says why.
      const { exitCode } = await sender.wait(EXEC_TIMEOUT_MS).catch((err: unknown) => {
        throw agentFailure(err, target.server);
      });
      if (exitCode === SCRIPT_EXIT.oddDirectory) throw directoryRefused('Downloads', exitCode);
      throw notFound(name);
    }
    if (size > maxBytes) {
      sender.close();
      throw new ApiError(ErrorCode.PayloadTooLarge, `The file (${size} bytes) is larger than the download limit (${this.config.DOWNLOAD_MAX_MB} MiB)`);
    }
    return { name, size, body: exactly(sender.stdout, size) };
  }

  /** A streaming exec as the workspace's user (never root). */
  private async stream(target: FileTarget, cmd: string, environment: Record<string, string>, stdin: boolean): Promise<StreamingExec> {
    try {
      return await target.host.execStream(target.containerId, { cmd, environment, stdin });
    } catch (err) {
      throw agentFailure(err, target.server);
    }
  }

  private async run(target: FileTarget, cmd: string, environment: Record<string, string>, maxOutputBytes?: number) {
    try {
      return await target.host.exec(target.containerId, { cmd, environment, timeoutMs: EXEC_TIMEOUT_MS, ...(maxOutputBytes ? { maxOutputBytes } : {}) });
    } catch (err) {
      throw agentFailure(err, target.server);
    }
  }
}

function notFound(name: string): ApiError {
  return new ApiError(ErrorCode.NotFound, `~/Downloads/${name} is not a file in this workspace`);
}

/** 409 for a transfer directory the script refused (SCRIPT_EXIT); the user can fix their home directory. */
function directoryRefused(dir: 'Uploads' | 'Downloads', exitCode: number): ApiError {
  if (exitCode === SCRIPT_EXIT.oddDirectory) {
    return new ApiError(ErrorCode.InvalidState, `~/${dir} leads to a directory whose path has control characters or a name starting or ending with a space; files are not moved there`);
  }
  if (dir === 'Uploads') return new ApiError(ErrorCode.InvalidState, `The workspace has no writable ~/Uploads for its user (exit ${exitCode})`);
  return new ApiError(ErrorCode.Unavailable, `Listing ~/Downloads failed (exit ${exitCode})`);
}

/** The first line of a download's output, its size: null when the output ended without one (the script refused). */
function readSizeLine(stdout: Readable, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => finish(new ApiError(ErrorCode.Unavailable, `The workspace did not start sending the file within ${timeoutMs} ms`)), timeoutMs);
    const finish = (result: number | null | Error, rest?: Buffer) => {
      clearTimeout(timer);
      stdout.off('data', onData);
      stdout.off('end', onEnd);
      stdout.off('error', onError);
      if (result instanceof Error) return reject(result);
      stdout.pause();
      if (rest?.length) stdout.unshift(rest);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const newline = head.indexOf(0x0a);
      if (newline < 0 && head.length < 32) return;
      const line = head.subarray(0, Math.max(newline, 0)).toString('latin1');
      if (newline < 0 || !/^\d{1,16}$/.test(line)) return finish(new ApiError(ErrorCode.Unavailable, 'The workspace answered the download with something else than a file size'));
      finish(Number(line), head.subarray(newline + 1));
    };
    const onEnd = () => finish(null);
    const onError = (err: Error) => finish(err);
    stdout.on('data', onData);
    stdout.once('end', onEnd);
    stdout.once('error', onError);
  });
}

/**
 * `source` passed on, but failing (never ending) unless it brought exactly `size` bytes: a response that ends short
 * of its Content-Length must be cut off, not completed. Destroying the result destroys `source`.
 */
function exactly(source: Readable, size: number): Readable {
  let seen = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > size) return done(new Error(`The file grew past ${size} bytes while it was sent`));
      done(null, chunk);
    },
    flush(done) {
      done(seen === size ? null : new Error(`The file ended after ${seen} of ${size} bytes`));
    },
  });
  source.once('error', (err) => counted.destroy(err));
  counted.once('close', () => source.destroy());
  return source.pipe(counted);
}

/** A script's short answer on stdout (an upload's final name): at most `max` bytes kept. */
async function readSmall(stdout: Readable, max: number): Promise<string> {
  const parts: Buffer[] = [];
  let kept = 0;
  for await (const chunk of stdout as AsyncIterable<Buffer>) {
    if (kept < max) parts.push(chunk.subarray(0, max - kept));
    kept += chunk.length;
  }
  return Buffer.concat(parts).toString('utf8');
}
