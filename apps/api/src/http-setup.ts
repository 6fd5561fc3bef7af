import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { ApiError, ErrorCode, findJsonProblem } from '@ws/common';

/**
 * An over-limit body is read and discarded up to this many bytes before the 413 is sent: answering while the
 * client is still sending makes the closing socket reset, and the client never sees the answer. Past this
 * (or a declared Content-Length above it) the 413 goes out at once and the connection is closed.
 */
export const MAX_DRAINED_BODY_BYTES = 64 * 1024 * 1024;
/** A client that trickles an over-limit body gets the 413 after this long, however much is left. */
export const MAX_DRAIN_MS = 30_000;

/** How much of an over-limit body is read and dropped before the 413 (tests shrink these). */
export interface DrainBounds {
  bytes: number;
  ms: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** `type/subtype` as RFC 9110 tokens: what Fastify accepts as a media type. */
const MEDIA_TYPE = /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+$/;

/**
 * Bodies are JSON whatever the Content-Type says (integrators' `curl -d` sends form encoding), and must
 * be objects of valid UTF-8 text that PostgreSQL can store, nested at most MAX_JSON_DEPTH levels. Parser
 * errors reach Nest's exception filters, so they leave in the same shape as ours.
 */
export function configureFastify(fastify: FastifyInstance, drain: DrainBounds = { bytes: MAX_DRAINED_BODY_BYTES, ms: MAX_DRAIN_MS }): void {
  const limit = fastify.initialConfig.bodyLimit ?? 1024 * 1024;
  // Fastify answers 415 to a Content-Type that is not even a media type (`garbage`, ``) without reading the
  // body; we read bodies as JSON whatever the type says, so such a header counts as absent.
  fastify.addHook('onRequest', (request, _reply, done) => {
    const contentType = request.headers['content-type'];
    if (contentType !== undefined && !MEDIA_TYPE.test(contentType.split(';')[0].trim())) delete request.headers['content-type'];
    done();
  });
  // Requests Node's HTTP parser refuses (malformed, headers too large, too slow) never reach a route; Fastify's
  // own answer for them lacks error_message. It is the only listener, registered when the instance was made.
  fastify.server.removeAllListeners('clientError');
  fastify.server.on('clientError', answerClientError);
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (request, payload, done) => {
    readBody(payload, Number(request.headers['content-length']), limit, drain, (error, bytes) => {
      if (error) return done(error, undefined);
      try {
        done(null, parseBody(bytes as Buffer));
      } catch (failure) {
        done(failure as Error, undefined);
      }
    });
  });
}

/** The parsed body of a request: `{}` when empty, else a JSON object that passes findJsonProblem. */
export function parseBody(bytes: Buffer): Record<string, unknown> {
  let text: string;
  try {
    text = utf8.decode(bytes).trim();
  } catch {
    throw new ApiError(ErrorCode.InvalidRequest, 'Request body is not valid UTF-8');
  }
  if (text === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ApiError(ErrorCode.InvalidRequest, 'Request body is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ApiError(ErrorCode.InvalidRequest, 'Request body must be a JSON object');
  }
  const problem = findJsonProblem(parsed);
  if (problem) throw new ApiError(ErrorCode.InvalidRequest, `${problem.path} ${problem.problem}`);
  return parsed as Record<string, unknown>;
}

const tooLarge = () => new ApiError(ErrorCode.PayloadTooLarge, 'Request body is too large');

/**
 * Reads a request body of at most `limit` bytes. A larger one is drained (read and dropped, within `drain`)
 * before refusing, so the 413 reaches the client. A callback, not a promise: every request's body passes here.
 */
function readBody(payload: IncomingMessage, declaredLength: number, limit: number, drain: DrainBounds, done: (error: Error | null, body?: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let received = 0;
  let draining = false;
  let finished = false;
  let drainTimer: NodeJS.Timeout | undefined;
  const finish = (error: Error | null, body?: Buffer) => {
    if (finished) return;
    finished = true;
    payload.off('data', onData).off('end', onEnd).off('error', onError).off('aborted', onAborted);
    clearTimeout(drainTimer);
    done(error, body);
  };
  const startDraining = () => {
    draining = true;
    chunks.length = 0;
    drainTimer = setTimeout(() => finish(tooLarge()), drain.ms);
  };
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (!draining && received > limit) startDraining();
    if (!draining) chunks.push(chunk);
    else if (received > drain.bytes) finish(tooLarge());
  };
  const onEnd = () => {
    if (received > limit) return finish(tooLarge());
    if (Number.isFinite(declaredLength) && received !== declaredLength) {
      return finish(new ApiError(ErrorCode.InvalidRequest, 'Content-Length does not match the body'));
    }
    finish(null, Buffer.concat(chunks, received));
  };
  const onError = (error: Error) => finish(new ApiError(ErrorCode.InvalidRequest, `Request body could not be read: ${error.message}`));
  const onAborted = () => finish(new ApiError(ErrorCode.InvalidRequest, 'Request body was cut short'));
  if (declaredLength > drain.bytes) return finish(tooLarge());
  if (declaredLength > limit) startDraining();
  payload.on('data', onData).on('end', onEnd).on('error', onError).on('aborted', onAborted);
  payload.resume();
}

/** Our JSON error for a request that could not even be parsed as HTTP; the connection is closed after it. */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'The request took too long to arrive']
      : error.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Request headers are too large']
        : [400, 'Malformed HTTP request'];
  const body = JSON.stringify({ error_message: message });
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}
