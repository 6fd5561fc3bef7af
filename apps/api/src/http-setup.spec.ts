import { connect } from 'node:net';
import Fastify, { FastifyInstance } from 'fastify';
import { ApiError, httpStatusFor } from '@ws/common';
import { configureFastify } from './http-setup';

const LIMIT = 4096;
const DRAIN = { bytes: 256 * 1024, ms: 300 };

interface Answer {
  status: number;
  body: unknown;
  error?: string;
}

/**
 * Sends `head`, then `body` in pieces (optionally stopping early to trickle), on a real loopback socket, and
 * reads only after writing, as simple clients do. Answers what arrived (or the socket error) when it closes.
 */
function exchange(port: number, head: string, body: Buffer, options: { stopAfter?: number } = {}): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const received: Buffer[] = [];
    let error: string | undefined;
    const timer = setTimeout(() => socket.destroy(new Error('no answer within 20 s')), 20_000);
    socket.pause();
    socket.on('data', (c: Buffer) => received.push(c));
    socket.on('error', (e) => (error = e.message));
    socket.on('close', () => {
      clearTimeout(timer);
      const raw = Buffer.concat(received).toString('utf8');
      const [top, ...rest] = raw.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(top)?.[1] ?? 0);
      let parsed: unknown = rest.join('\r\n\r\n');
      try {
        parsed = JSON.parse(parsed as string);
      } catch {
        // left as text
      }
      resolve({ status, body: parsed, error });
    });
    socket.on('connect', () => {
      socket.write(head);
      const sendUpTo = Math.min(body.length, options.stopAfter ?? body.length);
      let sent = 0;
      const more = (): void => {
        while (sent < sendUpTo) {
          const piece = body.subarray(sent, Math.min(sent + 16 * 1024, sendUpTo));
          sent += piece.length;
          if (!socket.write(piece)) return void socket.once('drain', more);
        }
        socket.resume();
      };
      more();
    });
  });
}

/** A request head; `connection: close` so the server ends the exchange after answering. */
const request = (framing: string) => `POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`;

describe('configureFastify body reading (a real fastify on loopback)', () => {
  let app: FastifyInstance;
  let port: number;

  beforeAll(async () => {
    app = Fastify({ bodyLimit: LIMIT });
    configureFastify(app, DRAIN);
    // What the Nest filter does for our errors: the code decides the status.
    app.setErrorHandler((error, _request, reply) => {
      const status = error instanceof ApiError ? httpStatusFor(error.code) : 500;
      void reply.status(status).send({ error_message: (error as Error).message });
    });
    app.post('/echo', async (req) => ({ got: req.body }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as { port: number }).port;
  });
  afterAll(() => app.close());

  it('parses a body within the limit, whatever its framing', async () => {
    const body = Buffer.from('{"a":"é"}');
    expect(await exchange(port, request(`content-length: ${body.length}`), body)).toEqual({ status: 200, body: { got: { a: 'é' } }, error: undefined });
    const chunked = Buffer.from(`${body.length.toString(16)}\r\n${body.toString('latin1')}\r\n0\r\n\r\n`, 'latin1');
    expect(await exchange(port, request('transfer-encoding: chunked'), chunked)).toEqual({ status: 200, body: { got: { a: 'é' } }, error: undefined });
  });

  it('reads an over-limit body to its end before answering 413, so the client that reads last still gets it', async () => {
    const body = Buffer.alloc(DRAIN.bytes - 1, 0x20);
    expect(await exchange(port, request(`content-length: ${body.length}`), body)).toEqual({ status: 413, body: { error_message: 'Request body is too large' }, error: undefined });
  });

  it('answers 413 at once when the declared length is beyond what it drains', async () => {
    const answer = await exchange(port, request(`content-length: ${DRAIN.bytes + 1}`), Buffer.alloc(0));
    expect([answer.status, answer.body]).toEqual([413, { error_message: 'Request body is too large' }]);
  });

  it('stops draining a trickling over-limit body after the time bound and answers 413', async () => {
    // Declares more than the limit, sends a little over it, then nothing: only the drain timer can end this.
    const answer = await exchange(port, request(`content-length: ${DRAIN.bytes - 1}`), Buffer.alloc(DRAIN.bytes - 1, 0x20), { stopAfter: LIMIT * 2 });
    expect([answer.status, answer.body]).toEqual([413, { error_message: 'Request body is too large' }]);
  });

  it('stops draining a chunked body past the drain bound: answers 413 and closes instead of reading forever', async () => {
    const piece = Buffer.alloc(8 * 1024, 0x20);
    const frame = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]);
    // No terminating chunk: as far as the server knows the body never ends. The client stops two frames past
    // the bound; whatever it sent after the server gave up may make the close a reset, which is the accepted
    // price past the bound. What must not happen is waiting for more.
    const frames = Buffer.concat(Array.from({ length: Math.ceil(DRAIN.bytes / piece.length) + 2 }, () => frame));
    const answer = await exchange(port, request('transfer-encoding: chunked'), frames);
    expect(answer.error).not.toBe('no answer within 20 s');
    if (answer.status !== 0) expect([answer.status, answer.body]).toEqual([413, { error_message: 'Request body is too large' }]);
  });

  it.each([
    ['not UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), 'Request body is not valid UTF-8'],
    ['UTF-8-encoded surrogate (CESU)', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]), 'Request body is not valid UTF-8'],
    ['not JSON', Buffer.from('a=1&b=2'), 'Request body is not valid JSON'],
    ['a JSON array', Buffer.from('[1]'), 'Request body must be a JSON object'],
    ['an escaped NUL', Buffer.from('{"a":{"b":"x\\u0000"}}'), 'a.b contains a NUL character'],
    ['an escaped lone surrogate', Buffer.from('{"a":["\\udc00"]}'), 'a[0] contains a lone UTF-16 surrogate (not valid Unicode)'],
  ])('refuses a body that is %s with 400', async (_what, body, message) => {
    expect(await exchange(port, request(`content-length: ${body.length}`), body)).toEqual({ status: 400, body: { error_message: message }, error: undefined });
  });

  it('reads a body whose Content-Type is not a media type as JSON (instead of Fastify refusing it with 415)', async () => {
    const body = Buffer.from('{"a":1}');
    const head = `POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: garbage\r\ncontent-length: ${body.length}\r\n\r\n`;
    expect(await exchange(port, head, body)).toEqual({ status: 200, body: { got: { a: 1 } }, error: undefined });
  });

  it('answers a request Node cannot parse with JSON error_message', async () => {
    const answer = await exchange(port, 'NOT HTTP AT ALL\r\n\r\n', Buffer.alloc(0));
    expect([answer.status, answer.body]).toEqual([400, { error_message: 'Malformed HTTP request' }]);
  });
});
