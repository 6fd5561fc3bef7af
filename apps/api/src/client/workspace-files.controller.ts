import { Controller, Get, HttpCode, OnModuleInit, Param, Post, Query, Req, Res, UseInterceptors } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LimitFailedAuth, PublicRoute } from '@ws/auth';
import { ApiError, AppConfig, ErrorCode } from '@ws/common';
import { attachmentDisposition, UPLOAD_CONTENT_TYPE, WorkspaceFiles } from '@ws/files';
import { originAllowed } from './browser-request-guard';
import { STREAM_COOKIE } from './client-connect.controller';

const UPLOAD_ROUTE = '/api/stream/:workspaceId/uploads';

/**
 * In-session files of the browser client, under the stream cookie's path (`port_map.uploads.path` is
 * `api/stream/<id>/uploads`): upload a file into ~/Uploads, list ~/Downloads and download one. Plain HTTP routes:
 * the stream gateway only answers websocket upgrades there. The owner's session only; the settings decide.
 */
@Controller('api/stream/:workspaceId')
@UseInterceptors(LimitFailedAuth)
export class WorkspaceFilesController implements OnModuleInit {
  constructor(
    private readonly files: WorkspaceFiles,
    private readonly adapterHost: HttpAdapterHost,
    private readonly config: AppConfig,
  ) {}

  /** The upload's body is the file: left unread by the body parsers, streamed by the route. */
  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    fastify.addContentTypeParser(UPLOAD_CONTENT_TYPE, (request, _payload, done) => {
      if (request.routeOptions.url === UPLOAD_ROUTE && request.method === 'POST') return done(null, undefined);
      done(new ApiError(ErrorCode.UnsupportedMediaType, 'Send the body as application/json'), undefined);
    });
  }

  /** What the control panel may upload: the size limit (403 when uploads are off). */
  @Get('uploads')
  @PublicRoute()
  async uploadLimits(@Param('workspaceId') workspaceId: string, @Req() request: FastifyRequest) {
    await this.files.authorize(this.sessionOf(request), workspaceId, 'upload');
    return { max_bytes: this.files.limits().upload_max_bytes };
  }

  /** The body (Content-Type application/x-workspace-file, with Content-Length) becomes ~/Uploads/<name>. */
  @Post('uploads')
  @HttpCode(201)
  @PublicRoute()
  async upload(@Param('workspaceId') workspaceId: string, @Query('name') name: unknown, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    try {
      if (!isUploadType(request.headers['content-type'])) throw new ApiError(ErrorCode.UnsupportedMediaType, `Send the file as ${UPLOAD_CONTENT_TYPE}`);
      const target = await this.files.authorize(this.sessionOf(request), workspaceId, 'upload');
      const declared = request.headers['content-length'];
      const length = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : null;
      return await this.files.upload(target, name, length, request.raw);
    } catch (err) {
      // Refused before or while reading: the rest of the body is not worth reading.
      if (!request.raw.readableEnded) void reply.header('connection', 'close');
      throw err;
    }
  }

  /** The regular files of ~/Downloads: name, size, mtime. */
  @Get('downloads')
  @PublicRoute()
  async listDownloads(@Param('workspaceId') workspaceId: string, @Req() request: FastifyRequest) {
    const target = await this.files.authorize(this.sessionOf(request), workspaceId, 'download');
    const { files, truncated } = await this.files.listDownloads(target);
    return { files, truncated, max_bytes: this.files.limits().download_max_bytes };
  }

  /** ~/Downloads/<name>, streamed as an attachment. */
  @Get('downloads/:name')
  @PublicRoute()
  async download(@Param('workspaceId') workspaceId: string, @Param('name') name: string, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const target = await this.files.authorize(this.sessionOf(request), workspaceId, 'download');
    const file = await this.files.download(target, name);
    // The response closes when sent or when the browser goes away: either way the archive is released.
    reply.raw.once('close', () => file.body.destroy());
    return reply
      .header('content-type', 'application/octet-stream')
      .header('content-length', file.size)
      .header('content-disposition', attachmentDisposition(file.name))
      .header('cache-control', 'private, no-store')
      .header('x-content-type-options', 'nosniff')
      .send(file.body);
  }

  /** The session JWT of the stream cookie, from a page of this service only (the cookie may be SameSite=None). */
  private sessionOf(request: FastifyRequest): string | null {
    if (!originAllowed(request.headers.origin, request.headers.host, new URL(this.config.PUBLIC_BASE_URL).origin)) {
      throw new ApiError(ErrorCode.Forbidden, 'Files may only be moved from pages of this service');
    }
    for (const part of (request.headers.cookie ?? '').split(';')) {
      const [key, ...rest] = part.trim().split('=');
      if (key === STREAM_COOKIE) return rest.join('=');
    }
    return null;
  }
}

function isUploadType(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0].trim().toLowerCase() === UPLOAD_CONTENT_TYPE;
}
