import { Controller, Get, Headers, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PublicRoute } from '@ws/auth';
import { ApiError, ErrorCode } from '@ws/common';
import { checkDownload, FileObjectStore, InjectObjectStore, ObjectNotFoundError, ObjectStore } from '@ws/storage';

/**
 * Signed download links of the file:// store (what S3's presigned urls are for s3://): the link itself is the
 * credential, so the route is public and trusts only the HMAC and the expiry in it.
 */
@Controller('api/storage')
export class StorageDownloadController {
  constructor(@InjectObjectStore() private readonly store: ObjectStore) {}

  @Get('*')
  @PublicRoute()
  async download(@Req() request: FastifyRequest, @Query('expires') expires: unknown, @Query('signature') signature: unknown, @Headers('range') range: string | undefined, @Res() reply: FastifyReply) {
    if (!(this.store instanceof FileObjectStore)) throw new ApiError(ErrorCode.NotFound, 'This deployment stores objects in S3: use the presigned link you were given');
    const key = keyOf(request.url);
    const check = key === null ? ({ ok: false, reason: 'invalid' } as const) : checkDownload(await this.store.signingSecret(), key, expires, signature);
    if (!check.ok) throw new ApiError(ErrorCode.Forbidden, check.reason === 'expired' ? 'This download link has expired' : 'This download link is not valid');
    const info = await this.store.head(key as string);
    if (!info) throw new ApiError(ErrorCode.NotFound, 'The object of this download link no longer exists');

    // A range this route does not serve (several, or outside the object) gets the whole object, as HTTP allows.
    const wanted = parseRange(range, info.size);
    const body = await this.store.get(key as string, wanted ?? undefined).catch((err: unknown) => {
      if (err instanceof ObjectNotFoundError) throw new ApiError(ErrorCode.NotFound, 'The object of this download link no longer exists');
      throw err;
    });
    reply.header('accept-ranges', 'bytes').header('content-type', info.contentType ?? 'application/octet-stream').header('cache-control', 'private, no-store');
    if (wanted) {
      reply.code(206).header('content-range', `bytes ${wanted.start}-${wanted.end}/${info.size}`).header('content-length', wanted.end - wanted.start + 1);
    } else {
      reply.code(200).header('content-length', info.size);
    }
    return reply.send(body);
  }
}

/** The object key from the raw path (segments percent-decoded); null when the path cannot be decoded. */
function keyOf(url: string): string | null {
  const path = url.split('?')[0].slice('/api/storage/'.length);
  try {
    return path.split('/').map(decodeURIComponent).join('/');
  } catch {
    return null;
  }
}

/** One satisfiable `bytes=a-b`, `bytes=a-` or `bytes=-n` range; null for none, another form, or one outside the object. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | null {
  const match = header ? /^bytes=(\d{0,15})-(\d{0,15})$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return null;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0 || size === 0) return null;
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(match[1]);
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (start >= size || end < start) return null;
  return { start, end };
}
