import { createServer, Server, Socket } from 'node:net';
import Redis, { ReplyError } from 'ioredis';
import { MaxRetriesPerRequestError } from 'ioredis/built/errors';
import { Client, DatabaseError, Pool } from 'pg';
import { QueryFailedError } from 'typeorm';
import { ApiError, ErrorCode } from './errors';
import { dependencyOutage, markDependency } from './dependency-errors';

/** A server error as pg's protocol parser builds it from the wire (severity and SQLSTATE set field by field). */
function serverError(code: string, message: string): DatabaseError {
  const error = new DatabaseError(message, message.length, 'error');
  error.severity = 'FATAL';
  error.code = code;
  return error;
}

/** Accepts connections and never answers: a stalled server as a client sees it. */
async function silentServer(): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port, sockets };
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const { server, port } = await silentServer();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function caught(action: () => Promise<unknown>): Promise<unknown> {
  try {
    await action();
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

describe('dependencyOutage', () => {
  let silent: Awaited<ReturnType<typeof silentServer>>;
  beforeAll(async () => (silent = await silentServer()));
  afterAll(async () => {
    for (const socket of silent.sockets) socket.destroy();
    await new Promise((resolve) => silent.server.close(resolve));
  });

  describe('errors the drivers raise on real connections', () => {
    it('pg: connection refused', async () => {
      const port = await closedPort();
      const error = await caught(() => new Client({ host: '127.0.0.1', port, connectionTimeoutMillis: 5000 }).connect());
      expect((error as { code?: string }).code).toBe('ECONNREFUSED');
      expect(dependencyOutage(error)).toBe('A dependency');
      // The database pool's connections mark their connect failures, so the answer can name PostgreSQL.
      expect(dependencyOutage(markDependency(error as Error, 'PostgreSQL'))).toBe('PostgreSQL');
    });

    it('pg-pool: a server that never answers the startup message', async () => {
      const pool = new Pool({ host: '127.0.0.1', port: silent.port, connectionTimeoutMillis: 200, max: 1 });
      const error = await caught(() => pool.query('SELECT 1'));
      await pool.end().catch(() => undefined);
      expect((error as Error).message).toMatch(/timeout|terminated/i);
      expect(dependencyOutage(error)).toBe('PostgreSQL');
    });

    it('pg-pool: a query after the pool was ended (a request in flight while the process shuts down)', async () => {
      const pool = new Pool({ host: '127.0.0.1', port: silent.port, max: 1 });
      await pool.end();
      const error = await caught(() => pool.query('SELECT 1'));
      expect((error as Error).message).toMatch(/after calling end/);
      expect(dependencyOutage(error)).toBe('PostgreSQL');
    });

    it('ioredis: a command to a server that never answers times out', async () => {
      const redis = new Redis({ host: '127.0.0.1', port: silent.port, commandTimeout: 200, maxRetriesPerRequest: 1, retryStrategy: () => null });
      redis.on('error', () => undefined);
      const error = await caught(() => redis.ping());
      redis.disconnect();
      expect((error as Error).message).toBe('Command timed out');
      expect(dependencyOutage(error)).toBe('Redis');
    });

    it('ioredis: a command while disconnected, without an offline queue', async () => {
      const port = await closedPort();
      const redis = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
      redis.on('error', () => undefined);
      const error = await caught(() => redis.get('key'));
      redis.disconnect();
      expect(dependencyOutage(error)).toBe('Redis');
    });

    it('ioredis: a closed connection', async () => {
      const redis = new Redis({ host: '127.0.0.1', port: silent.port, retryStrategy: () => null });
      redis.on('error', () => undefined);
      const ended = new Promise((resolve) => redis.once('end', resolve));
      redis.disconnect();
      await ended;
      const error = await caught(() => redis.get('key'));
      expect((error as Error).message).toBe('Connection is closed.');
      expect(dependencyOutage(error)).toBe('Redis');
    });
  });

  describe('server replies and wrappers', () => {
    it.each([
      ['57P01', 'terminating connection due to administrator command'],
      ['57P03', 'the database system is starting up'],
      ['53300', 'sorry, too many clients already'],
      ['08006', 'connection failure'],
      ['57014', 'canceling statement due to statement timeout'],
      ['55P03', 'canceling statement due to lock timeout'],
    ])('PostgreSQL %s (%s), bare and inside TypeORM\'s QueryFailedError', (code, message) => {
      expect(dependencyOutage(serverError(code, message))).toBe('PostgreSQL');
      expect(dependencyOutage(new QueryFailedError('SELECT 1', [], serverError(code, message)))).toBe('PostgreSQL');
    });

    it('Redis replies of a server that cannot serve now', () => {
      expect(dependencyOutage(new ReplyError('LOADING Redis is loading the dataset in memory'))).toBe('Redis');
      expect(dependencyOutage(new ReplyError('BUSY Redis is busy running a script.'))).toBe('Redis');
      expect(dependencyOutage(new MaxRetriesPerRequestError(1))).toBe('Redis');
    });

    it('a refused connection inside an AggregateError (a host name with several addresses) and a cause chain', () => {
      const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      expect(dependencyOutage(new AggregateError([refused, refused], ''))).toBe('A dependency');
      expect(dependencyOutage(new Error('lookup failed', { cause: new Error('Query read timeout') }))).toBe('PostgreSQL');
    });
  });

  describe('what is not an outage (stays a 4xx or a 500 with an error_id)', () => {
    it.each([
      ['a unique violation', new QueryFailedError('INSERT', [], serverError('23505', 'duplicate key value violates unique constraint'))],
      ['a syntax error', serverError('42601', 'syntax error at or near "SELEC"')],
      ['a wrong-type Redis reply', new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value')],
      ['an ApiError', new ApiError(ErrorCode.Conflict, 'Username (ada) is already taken')],
      ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'id')")],
      ['a SQLSTATE-like code on an error that is not from PostgreSQL', Object.assign(new Error('x'), { code: '57P01' })],
      ['null', null],
      ['a string', 'Connection terminated'],
    ])('%s', (_what, error) => {
      expect(dependencyOutage(error)).toBeNull();
    });

    it('a cycle of causes ends', () => {
      const a = new Error('a') as Error & { cause?: unknown };
      const b = new Error('b', { cause: a });
      a.cause = b;
      expect(dependencyOutage(a)).toBeNull();
    });
  });
});
