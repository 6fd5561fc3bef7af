import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, parseRetryAfter, WorkspaceApiError } from './index';

interface Seen {
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
}

type Handler = (seen: Seen, index: number) => { status: number; body?: unknown; headers?: Record<string, string>; raw?: Buffer };

/** A loopback stand-in for the api that answers from `handler` and records every request. */
async function fakeApi(handler: Handler): Promise<{ url: string; seen: Seen[]; close: () => Promise<void> }> {
  const seen: Seen[] = [];
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry = { path: request.url ?? '', headers: request.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown> };
      seen.push(entry);
      const answer = handler(entry, seen.length - 1);
      if (answer.raw) {
        response.writeHead(answer.status, { 'content-type': 'image/jpeg', ...answer.headers });
        response.end(answer.raw);
        return;
      }
      response.writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8', ...answer.headers });
      response.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const credentials = { apiKey: 'key', apiKeySecret: 'secret' };
const fast = { attempts: 4, baseDelayMs: 1, maxDelayMs: 2_000 };

describe('@workspace-server/client', () => {
  const servers: Array<{ close: () => Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });
  const start = async (handler: Handler) => {
    const api = await fakeApi(handler);
    servers.push(api);
    return api;
  };

  it('posts to /api/public/<operation> with the credentials in the body', async () => {
    const api = await start(() => ({ status: 200, body: { users: [] } }));
    const client = createClient({ baseUrl: `${api.url}/`, ...credentials });
    await expect(client.get_users()).resolves.toEqual({ users: [] });
    expect(api.seen[0].path).toBe('/api/public/get_users');
    expect(api.seen[0].body).toEqual({ api_key: 'key', api_key_secret: 'secret' });
    expect(api.seen[0].headers['idempotency-key']).toBeUndefined();
  });

  it('retries 503 and 429 and reuses one Idempotency-Key on the retries of a creating operation', async () => {
    const api = await start((_seen, index) => (index === 0 ? { status: 503, body: { error_message: 'PostgreSQL is unavailable' }, headers: { 'retry-after': '0' } }
      : index === 1 ? { status: 429, body: { error_message: 'slow down' } }
        : { status: 200, body: { user: { user_id: 'a'.repeat(32) } } }));
    const client = createClient({ baseUrl: api.url, ...credentials, retry: fast });
    const answer = await client.create_user({ target_user: { username: 'ada' } });
    expect(answer.user.user_id).toBe('a'.repeat(32));
    expect(api.seen).toHaveLength(3);
    const keys = api.seen.map((s) => s.headers['idempotency-key']);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys)).toEqual(new Set([keys[0]]));
    expect(api.seen.every((s) => (s.body.target_user as { username: string }).username === 'ada')).toBe(true);
  });

  it('sends a new key per call, or the one given', async () => {
    const api = await start(() => ({ status: 200, body: { user: {} } }));
    const client = createClient({ baseUrl: api.url, ...credentials });
    await client.create_user({ target_user: { username: 'a' } });
    await client.create_user({ target_user: { username: 'a' } });
    await client.call('create_user', { target_user: { username: 'a' } }, { idempotencyKey: 'mine' });
    const keys = api.seen.map((s) => s.headers['idempotency-key']);
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys[2]).toBe('mine');
  });

  it('gives up after the bounded number of attempts with the last error', async () => {
    const api = await start(() => ({ status: 503, body: { error_message: 'no capacity' } }));
    const client = createClient({ baseUrl: api.url, ...credentials, retry: { ...fast, attempts: 3 } });
    const error = await client.get_users().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(WorkspaceApiError);
    expect(error).toMatchObject({ status: 503, body: { error_message: 'no capacity' }, operation: 'get_users' });
    expect(api.seen).toHaveLength(3);
  });

  it('honours Retry-After: waits for a short one, stops at once on one longer than maxDelayMs', async () => {
    const short = await start((_seen, index) => (index === 0 ? { status: 429, body: { error_message: 'wait' }, headers: { 'retry-after': '1' } } : { status: 200, body: { users: [] } }));
    await expect(createClient({ baseUrl: short.url, ...credentials, retry: fast }).get_users()).resolves.toEqual({ users: [] });
    expect(short.seen).toHaveLength(2);

    const long = await start(() => ({ status: 429, body: { error_message: 'wait long' }, headers: { 'retry-after': '3600' } }));
    const error = await createClient({ baseUrl: long.url, ...credentials, retry: fast }).get_users().catch((err: unknown) => err);
    expect(error).toMatchObject({ status: 429, retryAfterSeconds: 3600 });
    expect(long.seen).toHaveLength(1);
  });

  it('does not retry other failures', async () => {
    const api = await start(() => ({ status: 400, body: { error_message: 'target_user.username must be a string' } }));
    const client = createClient({ baseUrl: api.url, ...credentials, retry: fast });
    await expect(client.create_user({ target_user: { username: 'x' } })).rejects.toThrow('create_user: 400 target_user.username must be a string');
    expect(api.seen).toHaveLength(1);
  });

  it('walks a paged list until next_cursor is null', async () => {
    const items = Array.from({ length: 5 }, (_, i) => ({ user_id: String(i) }));
    const api = await start(({ body }) => {
      const from = body.cursor === undefined ? 0 : Number(body.cursor);
      const to = from + Number(body.limit);
      return { status: 200, body: { users: items.slice(from, to), next_cursor: to < items.length ? String(to) : null } };
    });
    const client = createClient({ baseUrl: api.url, ...credentials });
    const walked: string[] = [];
    for await (const user of client.paginate('get_users', { limit: 2 })) walked.push(user.user_id);
    expect(walked).toEqual(['0', '1', '2', '3', '4']);
    expect(api.seen.map((s) => [s.body.limit, s.body.cursor])).toEqual([[2, undefined], [2, '2'], [2, '4']]);
  });

  it('stops after one page when the answer has no next_cursor (a server without paging)', async () => {
    const api = await start(() => ({ status: 200, body: { users: [{ user_id: '1' }, { user_id: '2' }] } }));
    const walked: string[] = [];
    for await (const user of createClient({ baseUrl: api.url, ...credentials }).paginate('get_users')) walked.push(user.user_id);
    expect(walked).toEqual(['1', '2']);
    expect(api.seen).toHaveLength(1);
  });

  it('refuses a cursor answered twice instead of looping', async () => {
    const api = await start(() => ({ status: 200, body: { users: [{ user_id: '1' }], next_cursor: 'same' } }));
    const walk = async () => {
      for await (const user of createClient({ baseUrl: api.url, ...credentials }).paginate('get_users', { limit: 1 })) void user;
    };
    await expect(walk()).rejects.toThrow('get_users answered the cursor same twice');
    expect(api.seen).toHaveLength(2);
  });

  it('answers bytes for an operation that answers bytes', async () => {
    const api = await start(() => ({ status: 200, raw: Buffer.from([0xff, 0xd8, 0xff]) }));
    const jpeg = await createClient({ baseUrl: api.url, ...credentials }).get_workspace_screenshot({ workspace_id: 'w', user_id: 'u' });
    expect([...jpeg]).toEqual([0xff, 0xd8, 0xff]);
  });

  it('is not a thenable: it can be returned from an async function', async () => {
    const api = await start(() => ({ status: 200, body: { users: [] } }));
    const client = await (async () => createClient({ baseUrl: api.url, ...credentials }))();
    await expect(client.get_users()).resolves.toEqual({ users: [] });
    expect(api.seen.map((s) => s.path)).toEqual(['/api/public/get_users']);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(parseRetryAfter('7')).toBe(7);
    expect(parseRetryAfter(null)).toBeNull();
    expect(parseRetryAfter('soon')).toBeNull();
    expect(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 30)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(30);
  });
});
