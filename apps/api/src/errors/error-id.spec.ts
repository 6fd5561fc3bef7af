import 'reflect-metadata';
import { Controller, Get, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Module } from '@nestjs/common';
import { requestIdOf } from '@ws/logging';
import { ApiExceptionFilter } from './api-exception.filter';

@Controller()
class ThrowingController {
  @Get('boom')
  boom(): never {
    throw new TypeError('an unexpected failure');
  }
}

@Module({ controllers: [ThrowingController] })
class ThrowingModule {}

/** A 500's error_id is the request's id: the one in X-Request-Id and on the request's log lines. */
describe('error_id of an unexpected failure', () => {
  let app: NestFastifyApplication;
  const logged: string[] = [];

  beforeAll(async () => {
    // As createApi: Fastify makes (or keeps) the request id and echoes it.
    const adapter = new FastifyAdapter({ genReqId: requestIdOf });
    adapter.getInstance().addHook('onRequest', async (request, reply) => void reply.header('x-request-id', request.id));
    app = await NestFactory.create<NestFastifyApplication>(ThrowingModule, adapter, { logger: false });
    app.useGlobalFilters(new ApiExceptionFilter());
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void logged.push(String(message)));
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await app?.close();
  });

  it('is the incoming X-Request-Id, in the answer, the header and the error line', async () => {
    const res = await app.getHttpAdapter().getInstance().inject({ method: 'GET', url: '/boom', headers: { 'x-request-id': 'req-500-unit' } });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error_message: 'Internal error', error_id: 'req-500-unit' });
    expect(res.headers['x-request-id']).toBe('req-500-unit');
    expect(logged.some((line) => line.startsWith('error_id=req-500-unit ') && line.includes('an unexpected failure'))).toBe(true);
  });

  it('is the id made for a request that sent none', async () => {
    const res = await app.getHttpAdapter().getInstance().inject({ method: 'GET', url: '/boom' });
    expect(res.statusCode).toBe(500);
    const id = res.headers['x-request-id'];
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(res.json()).toEqual({ error_message: 'Internal error', error_id: id });
  });
});
