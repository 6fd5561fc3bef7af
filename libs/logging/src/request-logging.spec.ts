import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { assignLogFields, createRootLogger, rootLogger, withLogBindings } from './log-context';
import { closeLogFiles, requestIdOf } from './log-options';
import { registerRequestLogging } from './request-logging';

describe('request logging', () => {
  let dir: string;
  let path: string;
  const lines = () => readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ws-request-log-'));
    path = join(dir, 'api.log');
    createRootLogger({ LOG_LEVEL: 'log', LOG_FILE: path }, 'test');
  });
  afterEach(() => {
    closeLogFiles();
    rmSync(dir, { recursive: true, force: true });
  });

  async function app() {
    const fastify = Fastify({ genReqId: requestIdOf });
    registerRequestLogging(fastify);
    fastify.post('/op/:name', async (request) => {
      const { name } = request.params as { name: string };
      assignLogFields({ operation: name });
      // Another request's lines must not get these fields, even while this one waits.
      await new Promise((resolve) => setImmediate(resolve));
      rootLogger()?.warn({ token: 'never-logged' }, `inside ${name}`);
      if (name === 'broken') throw new Error('broken on purpose');
      return { name };
    });
    await fastify.ready();
    return fastify;
  }

  it("puts the request's id and fields on its lines and one completed line, without leaking between requests", async () => {
    const fastify = await app();
    const [one, two] = await Promise.all([
      fastify.inject({ method: 'POST', url: '/op/first', headers: { 'x-request-id': 'req-one' } }),
      fastify.inject({ method: 'POST', url: '/op/second', headers: { 'x-request-id': 'req-two' } }),
    ]);
    expect([one.statusCode, two.statusCode]).toEqual([200, 200]);
    await fastify.close();
    const written = lines();
    expect(written.find((l) => l.msg === 'inside first')).toMatchObject({ level: 'warn', request_id: 'req-one', operation: 'first', token: '[redacted]' });
    expect(written.find((l) => l.msg === 'inside second')).toMatchObject({ request_id: 'req-two', operation: 'second' });
    const completed = written.filter((l) => (l.res as { status_code?: number } | undefined)?.status_code !== undefined);
    expect(completed).toHaveLength(2);
    expect(completed.find((l) => l.request_id === 'req-one')).toMatchObject({
      level: 'info', operation: 'first', req: { method: 'POST', url: '/op/first' }, res: { status_code: 200 }, responseTime: expect.any(Number),
      msg: expect.stringMatching(/^POST \/op\/first 200 \d+ ms$/),
    });
  });

  it('logs a 5xx at error level, and a line outside any request has no request fields', async () => {
    const fastify = await app();
    expect((await fastify.inject({ method: 'POST', url: '/op/broken' })).statusCode).toBe(500);
    await fastify.close();
    rootLogger()?.warn('outside');
    withLogBindings({ job_id: 'j1' }, () => rootLogger()?.warn('in a job'));
    const written = lines();
    expect(written.find((l) => (l.res as { status_code?: number } | undefined)?.status_code === 500)).toMatchObject({ level: 'error', operation: 'broken', msg: 'POST /op/broken 500 failed' });
    const outside = written.find((l) => l.msg === 'outside');
    expect(outside).not.toHaveProperty('request_id');
    expect(outside).not.toHaveProperty('operation');
    expect(written.find((l) => l.msg === 'in a job')).toMatchObject({ job_id: 'j1' });
  });
});
