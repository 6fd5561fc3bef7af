import Fastify, { FastifyInstance } from 'fastify';
import { originAllowed, registerBrowserRequestGuard } from './browser-request-guard';

const PUBLIC_ORIGIN = 'https://desk.example.org';

describe('originAllowed', () => {
  it('passes no Origin, the request host and the public origin; refuses the rest', () => {
    expect(originAllowed(undefined, '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(true);
    expect(originAllowed('http://127.0.0.1:8080', '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(true);
    expect(originAllowed('https://desk.example.org', '10.0.0.5:8080', PUBLIC_ORIGIN)).toBe(true);
    expect(originAllowed('http://127.0.0.1:8081', '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(false);
    expect(originAllowed('https://desk.example.org.evil.example', '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(false);
    expect(originAllowed('http://desk.example.org', '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(false);
    expect(originAllowed('null', '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(false);
    expect(originAllowed('', '127.0.0.1:8080', PUBLIC_ORIGIN)).toBe(false);
    expect(originAllowed('http://127.0.0.1:8080', undefined, PUBLIC_ORIGIN)).toBe(false);
  });
});

describe('registerBrowserRequestGuard (on a real fastify instance)', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    app = Fastify();
    app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));
    registerBrowserRequestGuard(app, PUBLIC_ORIGIN);
    app.post('/api/client/connect', async () => ({ ok: true }));
    app.post('/api/public/get_images', async () => ({ ok: true }));
    await app.ready();
  });
  afterAll(() => app.close());

  const post = (url: string, headers: Record<string, string>) => app.inject({ method: 'POST', url, headers: { host: '127.0.0.1:8080', ...headers }, payload: '{}' });

  it('needs application/json and a matching or absent Origin on /api/client/*', async () => {
    expect((await post('/api/client/connect', { 'content-type': 'application/json' })).statusCode).toBe(200);
    expect((await post('/api/client/connect', { 'content-type': 'Application/JSON; charset=utf-8', origin: 'http://127.0.0.1:8080' })).statusCode).toBe(200);
    const plain = await post('/api/client/connect', { 'content-type': 'text/plain' });
    expect(plain.statusCode).toBe(415);
    expect(plain.json()).toEqual({ error_message: 'Send the body as application/json' });
    expect((await post('/api/client/connect', { 'content-type': 'application/jsonx' })).statusCode).toBe(415);
    const foreign = await post('/api/client/connect', { 'content-type': 'application/json', origin: 'https://evil.example' });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.json().error_message).toMatch(/Cross-site/);
    // The query string or percent-encoding do not move a request around the check (the matched route decides).
    expect((await post('/api/client/connect?x=1', { 'content-type': 'text/plain' })).statusCode).toBe(415);
    expect((await post('/api/%63lient/connect', { 'content-type': 'text/plain' })).statusCode).not.toBe(200);
  });

  it('leaves /api/public/* alone: curl -d bodies from anywhere', async () => {
    expect((await post('/api/public/get_images', { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' })).statusCode).toBe(200);
  });
});
