import { ApiError, ErrorCode } from '@ws/common';

/** Linux's NAME_MAX: longer names cannot be created in the workspace. */
const MAX_NAME_BYTES = 255;
// C0 controls, DEL and C1 controls: invisible in a file list, and a newline would break shell-made listings.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Half of a UTF-16 pair on its own: not encodable as UTF-8. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A file name that stays inside ~/Uploads or ~/Downloads: one path segment, no separators (`/`, `\`), not `.`
 * or `..`, no control characters, no space at either end, at most 255 UTF-8 bytes. Anything else is refused (400), never rewritten:
 * the client shows the name it sent, so a silently changed one would surprise.
 */
export function checkFileName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw new ApiError(ErrorCode.InvalidRequest, 'Name the file (query parameter name)');
  if (name === '.' || name === '..') throw new ApiError(ErrorCode.InvalidRequest, `File name ${JSON.stringify(name)} is not allowed`);
  if (name.includes('/') || name.includes('\\')) throw new ApiError(ErrorCode.InvalidRequest, 'File names must not contain / or \\');
  if (CONTROL.test(name)) throw new ApiError(ErrorCode.InvalidRequest, 'File names must not contain control characters');
  if (name.trim() === '') throw new ApiError(ErrorCode.InvalidRequest, 'File names must not be blank');
  // A name that differs from what is shown only by invisible spaces misleads, as a path would.
  if (name.trim() !== name) throw new ApiError(ErrorCode.InvalidRequest, 'File names must not start or end with a space');
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) throw new ApiError(ErrorCode.InvalidRequest, `File names are at most ${MAX_NAME_BYTES} bytes`);
  if (LONE_SURROGATE.test(name)) throw new ApiError(ErrorCode.InvalidRequest, 'File names must be valid Unicode');
  return name;
}

/** True for names checkFileName accepts: the Downloads list shows only files that can be downloaded. */
export function isTransferableName(name: string): boolean {
  try {
    checkFileName(name);
    return true;
  } catch {
    return false;
  }
}

/** `Content-Disposition: attachment` for any name: an ASCII fallback plus RFC 5987's UTF-8 form. */
export function attachmentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

/**
 * The Content-Type an upload's body is sent with. Its own type lets the api leave the body unread for the upload
 * route (every other body is parsed as JSON), and, not being a form's type, a page of another site cannot send it
 * without a CORS preflight the api never grants.
 */
export const UPLOAD_CONTENT_TYPE = 'application/x-workspace-file';
