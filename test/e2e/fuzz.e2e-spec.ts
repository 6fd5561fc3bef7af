/**
 * Input robustness, generated from the operation catalog (libs/auth/src/operations.ts): every operation gets
 * property-based requests (fast-check, fixed seeds) with a Global Admin key, so validation is reached. Each
 * operation's body shape comes from its routed handler's @Body() DTO (class-validator and class-transformer
 * metadata), so mutations hit real fields: wrong types, missing and extra fields, NUL and lone surrogates,
 * huge strings, deep nesting; and whole bodies that are not JSON, not objects, not UTF-8, deeply nested
 * text, oversized, under any content type. What must hold: no 5xx, every error is JSON with an
 * `error_message`, and the api stays healthy with the key still valid. No worker runs, so nothing starts a
 * container; request_workspace only records rows and enqueues jobs in this test's own Redis prefix.
 * Replay a failure with FUZZ_SEED=<printed seed> (and FUZZ_RUNS to run longer).
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { getMetadataStorage } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import fc from 'fast-check';
import { DataSource } from 'typeorm';
import { OperationName, OPERATIONS } from '@ws/auth';
import { MAX_JSON_DEPTH } from '@ws/common';
import { insertWorkspaceRow } from './fixtures';
import { OPERATION_CONTROLLERS } from '../../apps/api/src/app.module';
import { operationHandlersOf } from '../../apps/api/src/public-api/operation-routes';
import { TestApi, TestKey } from './harness';

// class-transformer keeps @Type() in a storage its typings do not export.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { defaultMetadataStorage: typeStorage } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: { findTypeMetadata(target: object, property: string): { typeFunction: () => unknown } | undefined };
};

const BASE_SEED = Number(process.env.FUZZ_SEED ?? 808);
const RUNS_PER_OPERATION = Number(process.env.FUZZ_RUNS ?? 100);
const MAX_BODY_BYTES = 256 * 1024;
const REQUEST_TIMEOUT_MS = 60_000;
const CATALOG = Object.keys(OPERATIONS) as OperationName[];

// ---- body shapes from the DTOs ----------------------------------------------------------------------------

type Field =
  | { kind: 'string' | 'boolean' | 'any' }
  | { kind: 'int'; min: number; max: number }
  | { kind: 'oneOf'; values: unknown[] }
  | { kind: 'object'; fields: Shape | null };
type Shape = Record<string, Field>;

/** A DTO's validated properties and what each expects, following @Type() into nested DTOs. */
function shapeOf(dto: new () => object, seen: ReadonlySet<unknown> = new Set()): Shape {
  const metadata = getMetadataStorage().getTargetValidationMetadatas(dto, '', true, false);
  const byProperty = new Map<string, ValidationMetadata[]>();
  for (const m of metadata) byProperty.set(m.propertyName, [...(byProperty.get(m.propertyName) ?? []), m]);
  const shape: Shape = {};
  for (const [property, rules] of byProperty) {
    const named = (name: string) => rules.find((r) => r.name === name);
    const nested = typeStorage.findTypeMetadata(dto, property)?.typeFunction() as (new () => object) | undefined;
    if (nested && !seen.has(nested)) shape[property] = { kind: 'object', fields: shapeOf(nested, new Set([...seen, dto])) };
    else if (named('isString')) shape[property] = { kind: 'string' };
    else if (named('isBoolean')) shape[property] = { kind: 'boolean' };
    else if (named('isInt')) shape[property] = { kind: 'int', min: Number(named('min')?.constraints[0] ?? -10), max: Number(named('max')?.constraints[0] ?? 10_000) };
    else if (named('isIn')) shape[property] = { kind: 'oneOf', values: named('isIn')?.constraints[0] as unknown[] };
    else if (named('isObject') || named('isEnvironment')) shape[property] = { kind: 'object', fields: null };
    else shape[property] = { kind: 'any' };
  }
  return shape;
}

/** Operation → the DTO of its routed handler's @Body() (null: routed without a body). Unrouted ones are absent. */
function routedBodies(): Map<string, (new () => object) | null> {
  const bodies = new Map<string, (new () => object) | null>();
  for (const handler of operationHandlersOf(OPERATION_CONTROLLERS)) {
    const body = handler.params.find((param) => param.kind === 'body');
    bodies.set(handler.operation, body?.kind === 'body' ? body.type : null);
  }
  return bodies;
}

// ---- hostile values, printed briefly in counterexamples -----------------------------------------------------

/** A long string: serialized in full, shown in a failure report as its recipe. */
class Huge {
  constructor(readonly length: number, readonly unit: string) {}
  toJSON(): string {
    return this.unit.repeat(this.length);
  }
  [fc.toStringMethod](): string {
    return `Huge(${this.length} × ${JSON.stringify(this.unit)})`;
  }
}

/** Objects or arrays nested `levels` deep, built without recursion. */
class Deep {
  constructor(readonly levels: number, readonly arrays: boolean) {}
  toJSON(): unknown {
    let value: unknown = 'bottom';
    for (let i = 0; i < this.levels; i++) value = this.arrays ? [value] : { a: value };
    return value;
  }
  [fc.toStringMethod](): string {
    return `Deep(${this.levels}, ${this.arrays ? 'arrays' : 'objects'})`;
  }
}

/** Text PostgreSQL cannot store or that is otherwise awkward: NUL, lone surrogates, any UTF-16, huge. */
const hostileText: fc.Arbitrary<unknown> = fc.oneof(
  fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`),
  fc.constantFrom('\u0000', '\uD800', 'a\uDFFFb', '\uDBFF', '\uDE00\uD83D', 'ok\u{1F600}'),
  fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 12 }).map((codes) => String.fromCharCode(...codes)),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.integer({ min: 1_000, max: 100_000 }).map((n) => new Huge(n, 'x')),
  fc.constantFrom(new Huge(40_000, 'é'), new Huge(20_000, '\u{1F600}'), new Huge(30_000, '\u0000')),
);

const wrongType: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(), fc.double(), fc.boolean(), fc.constant(null),
  fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  // Serializing deeper objects overflows the test's own stack; the raw deepText payload goes far deeper.
  fc.tuple(fc.integer({ min: MAX_JSON_DEPTH - 2, max: 1_000 }), fc.boolean()).map(([levels, arrays]) => new Deep(levels, arrays)),
);

// ---- requests -------------------------------------------------------------------------------------------

type Credentials = 'body' | 'basic' | 'body-nul' | 'basic-nul' | 'none';
type Payload =
  | { json: Record<string, unknown> }
  | { jsonText: string }
  | { text: string }
  | { bytes: number[] }
  | { deepText: number }
  | { oversized: number };

interface Plan {
  credentials: Credentials;
  contentType: string | null;
  payload: Payload;
}

const CONTENT_TYPES = [
  'application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x', 'application/xml', 'application/octet-stream', 'application/json; charset=utf-16',
  // Not media types at all: still read as JSON on /api/public.
  '', 'garbage', 'application/', '/json', 'a/b/c', 'application/json;;', 'text/plain; charset',
];

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

/** One POST over a fresh loopback connection, with exactly these headers and bytes; bounded in time. */
function post(baseUrl: string, path: string, headers: Record<string, string>, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${baseUrl}${path}`, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * POSTs `size` bytes of filler over a raw socket (Content-Length or chunked) and reads nothing until all of it
 * is written, as simple clients do. A server that answers early and closes leaves unread bytes behind, and
 * its reset makes the client's kernel drop the answer: then this rejects (ECONNRESET or EPIPE).
 */
function postWholeThenRead(baseUrl: string, path: string, size: number, chunked: boolean): Promise<Answer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const timer = setTimeout(() => socket.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)), REQUEST_TIMEOUT_MS);
    const received: Buffer[] = [];
    socket.pause();
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('end', () => {
      clearTimeout(timer);
      const raw = Buffer.concat(received).toString('utf8');
      const [head, ...rest] = raw.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, contentType: /\r\ncontent-type: ([^\r]*)/i.exec(head)?.[1] ?? '', text: rest.join('\r\n\r\n') });
    });
    socket.on('connect', () => {
      const framing = chunked ? 'transfer-encoding: chunked' : `content-length: ${size}`;
      socket.write(`POST ${path} HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`);
      const piece = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const writeMore = (): void => {
        while (sent < size) {
          const chunk = piece.subarray(0, Math.min(piece.length, size - sent));
          sent += chunk.length;
          const ok = chunked ? socket.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])) : socket.write(chunk);
          if (!ok) return void socket.once('drain', writeMore);
        }
        if (chunked) socket.write('0\r\n\r\n');
        // Everything is written: now read the answer (the server closes after its 413).
        socket.resume();
      };
      writeMore();
    });
  });
}

/** Writes raw bytes on a fresh connection and reads until the server closes it. */
function rawExchange(baseUrl: string, bytes: string): Promise<Answer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(bytes));
    const timer = setTimeout(() => socket.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)), REQUEST_TIMEOUT_MS);
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const raw = Buffer.concat(received).toString('utf8');
      const [head, ...rest] = raw.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), contentType: /\r\ncontent-type: ([^\r]*)/i.exec(head)?.[1] ?? '', text: rest.join('\r\n\r\n') });
    });
  });
}

/** Declares a body of `declared` bytes, sends none of it, and waits for the answer. */
function postDeclaredOnly(baseUrl: string, path: string, declared: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(declared) }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') });
        req.destroy();
      });
      res.on('error', reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.flushHeaders();
  });
}

/** The invariant: below 500, and an error is JSON with a non-empty error_message. Throws with the evidence. */
function checkAnswer(answer: Answer): void {
  const shown = `${answer.status} ${answer.contentType} ${answer.text.slice(0, 300)}`;
  if (answer.status < 200 || answer.status >= 500) throw new Error(`answered ${shown}`);
  if (answer.status < 400) return;
  if (!/^application\/json/.test(answer.contentType)) throw new Error(`error without a JSON content type: ${shown}`);
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    throw new Error(`error body is not JSON: ${shown}`);
  }
  const message = (body as { error_message?: unknown } | null)?.error_message;
  if (typeof message !== 'string' || message === '') throw new Error(`error without error_message: ${shown}`);
}

describe('fuzz: every catalog operation, hostile input (fast-check)', () => {
  let api: TestApi;
  let baseUrl: string;
  let admin: TestKey;
  let bodies: Map<string, (new () => object) | null>;
  /** Real identifiers of every kind, so mutated bodies also reach the services' lookups. */
  let knownIds: string[];
  /** How often each status was answered over the whole run: proof the plans reach every layer. */
  const statuses = new Map<number, number>();

  beforeAll(async () => {
    // Many plans fail authentication on purpose; with the default failure limit the address would soon get
    // only 429s and the other plans would never reach validation.
    api = await TestApi.start({ MAX_BODY_BYTES, AUTH_FAILURES_PER_ADDRESS: 1_000_000 });
    baseUrl = await api.listen();
    admin = await api.key(['Global Admin']);
    bodies = routedBodies();
    const users = [];
    for (const username of ['fuzz-a', 'fuzz-b']) {
      const res = await api.call('create_user', admin, { target_user: { username } });
      expect(res.status).toBe(200);
      users.push(res.body.user.user_id as string);
    }
    const db = api.app.get(DataSource);
    // A workspace row that is still starting (no worker runs, so no container ever exists), with its server and image.
    const workspace = await insertWorkspaceRow(db, users[0], 'starting');
    const groups: Array<{ id: string }> = await db.query('SELECT id FROM groups');
    knownIds = [...users, workspace.id, workspace.imageId as string, workspace.serverId as string, workspace.shareId as string, ...groups.map((g) => g.id)].map((id) => id.replace(/-/g, ''));
    knownIds.push(users[1].replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'), '0'.repeat(32));
  });

  afterAll(async () => api?.close());

  const plausible = (field: Field): fc.Arbitrary<unknown> => {
    switch (field.kind) {
      case 'string':
        return fc.oneof(fc.constantFrom(...knownIds), fc.string({ maxLength: 16 }), fc.constantFrom('', 'ada', '/tmp', 'root', 'en-US', 'Europe/Berlin', 'http://127.0.0.1/x', 'none'));
      case 'boolean':
        return fc.boolean();
      case 'int':
        return fc.integer({ min: field.min - 2, max: field.max + 2 });
      case 'oneOf':
        return fc.constantFrom(...field.values);
      case 'object':
        return field.fields
          ? shaped(field.fields)
          : fc.dictionary(fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/), fc.oneof(fc.string({ maxLength: 8 }), hostileText), { maxKeys: 4 });
      case 'any':
        return fc.jsonValue({ maxDepth: 2 });
    }
  };

  /** Each field absent, plausible or hostile; plus a few fields nobody declared. */
  const shaped = (shape: Shape): fc.Arbitrary<Record<string, unknown>> => {
    const fields = Object.fromEntries(
      Object.entries(shape).map(([name, field]) => [name, fc.oneof({ arbitrary: plausible(field), weight: 3 }, { arbitrary: hostileText, weight: 1 }, { arbitrary: wrongType, weight: 1 })]),
    );
    const extras = fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.jsonValue({ maxDepth: 2 }), hostileText, wrongType), { maxKeys: 2 });
    return fc.tuple(extras, fc.record(fields, { requiredKeys: [] })).map(([extra, declared]) => ({ ...extra, ...declared }));
  };

  const planFor = (shape: Shape): fc.Arbitrary<Plan> =>
    fc.record({
      credentials: fc.constantFrom<Credentials>('body', 'body', 'body', 'body', 'basic', 'body-nul', 'basic-nul', 'none'),
      contentType: fc.oneof({ arbitrary: fc.constant('application/json'), weight: 3 }, { arbitrary: fc.constantFrom(...CONTENT_TYPES), weight: 2 }, { arbitrary: fc.constant(null), weight: 1 }),
      payload: fc.oneof(
        { arbitrary: shaped(shape).map((json): Payload => ({ json })), weight: 12 },
        { arbitrary: fc.jsonValue({ maxDepth: 2 }).filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)).map((v): Payload => ({ jsonText: JSON.stringify(v) })), weight: 1 },
        { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map((text): Payload => ({ text })), weight: 1 },
        { arbitrary: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 40 }).map((bytes): Payload => ({ bytes })), weight: 1 },
        { arbitrary: fc.integer({ min: MAX_JSON_DEPTH, max: 100_000 }).map((deepText): Payload => ({ deepText })), weight: 1 },
        { arbitrary: fc.integer({ min: MAX_BODY_BYTES + 1, max: 4 * MAX_BODY_BYTES }).map((oversized): Payload => ({ oversized })), weight: 1 },
      ),
    });

  /** The request a plan describes: credentials where the plan says, the payload as bytes. */
  function materialize(plan: Plan): { headers: Record<string, string>; body: Buffer } {
    const headers: Record<string, string> = {};
    if (plan.contentType !== null) headers['content-type'] = plan.contentType;
    const key = plan.credentials.endsWith('-nul') ? { ...admin, api_key: `${admin.api_key}\u0000` } : admin;
    if (plan.credentials.startsWith('basic')) headers.authorization = `Basic ${Buffer.from(`${key.api_key}:${key.api_key_secret}`, 'utf8').toString('base64')}`;
    const inBody = plan.credentials.startsWith('body') ? key : {};
    const { payload } = plan;
    let text: string;
    if ('json' in payload) text = JSON.stringify({ ...inBody, ...payload.json });
    else if ('jsonText' in payload) text = payload.jsonText;
    else if ('text' in payload) text = payload.text;
    else if ('bytes' in payload) return { headers, body: Buffer.from(payload.bytes) };
    else if ('deepText' in payload) text = `{"api_key":${JSON.stringify(key.api_key)},"x":${'['.repeat(payload.deepText)}${']'.repeat(payload.deepText)}}`;
    else text = JSON.stringify({ ...inBody, filler: 'x'.repeat(payload.oversized) });
    return { headers, body: Buffer.from(text, 'utf8') };
  }

  describe('the defects of issue 8, exactly', () => {
    const USER_TEXT_FIELDS = ['username', 'first_name', 'last_name', 'organization', 'phone'];

    it.each(CATALOG.map((op) => [op]))('%s: a NUL in api_key is 400 naming it, before authentication', async (op) => {
      const answer = await post(baseUrl, `/api/public/${op}`, { 'content-type': 'application/json' }, Buffer.from('{"api_key":"x\\u0000","api_key_secret":"y"}'));
      expect([answer.status, JSON.parse(answer.text)]).toEqual([400, { error_message: 'api_key contains a NUL character' }]);
    });

    it.each(CATALOG.map((op) => [op]))('%s: a NUL in the Basic header is 400 (routed) or 404 (unrouted), never a lookup', async (op) => {
      const res = await api.raw().post(`/api/public/${op}`).set('authorization', `Basic ${Buffer.from('ke\u0000y:secret').toString('base64')}`).send({});
      if (bodies.has(op as string)) expect([res.status, res.body]).toEqual([400, { error_message: 'api_key in the Authorization header contains a NUL character' }]);
      else expect([res.status, res.body]).toEqual([404, { error_message: 'Unknown operation' }]);
    });

    it.each(CATALOG.map((op) => [op]))('%s: a body nested 5,000 levels deep is 400 naming where', async (op) => {
      const deep = `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
      const text = `{"api_key":${JSON.stringify(admin.api_key)},"api_key_secret":${JSON.stringify(admin.api_key_secret)},"target_user":${deep}}`;
      const answer = await post(baseUrl, `/api/public/${op}`, { 'content-type': 'application/json' }, Buffer.from(text));
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.text)).toEqual({ error_message: `target_user${'.a'.repeat(MAX_JSON_DEPTH - 1)} is nested deeper than ${MAX_JSON_DEPTH} levels` });
    });

    it.each(USER_TEXT_FIELDS.flatMap((field) => [['create_user', field], ['update_user', field]]))('%s: a NUL or a lone surrogate in %s is 400 naming the field', async (op, field) => {
      for (const [value, reason] of [['a\u0000b', 'contains a NUL character'], ['a\uD800b', 'contains a lone UTF-16 surrogate (not valid Unicode)']]) {
        const target = op === 'create_user' ? { username: 'fuzz-c', [field]: value } : { user_id: knownIds[1], [field]: value };
        const res = await api.call(op, admin, { target_user: target });
        expect([res.status, res.body]).toEqual([400, { error_message: `target_user.${field} ${reason}` }]);
      }
    });

    it('the same user text without them is stored as sent (control)', async () => {
      const res = await api.call('create_user', admin, { target_user: { username: 'fuzz-\u{1F600}', first_name: 'tab\there', organization: 'é' } });
      expect(res.status).toBe(200);
      expect(res.body.user).toMatchObject({ username: 'fuzz-\u{1F600}', first_name: 'tab\there', organization: 'é' });
    });

    it.each([
      ['12 MB with Content-Length, 5 times', 12 * 1024 * 1024, false, 5],
      ['12 MB chunked, 3 times', 12 * 1024 * 1024, true, 3],
      ['64 MiB with Content-Length, twice', 64 * 1024 * 1024, false, 2],
    ])('a %s: every time the 413 JSON answer, not a reset', async (_what, size, chunked, times) => {
      for (let attempt = 0; attempt < (times as number); attempt++) {
        const answer = await postWholeThenRead(baseUrl, '/api/public/create_user', size as number, chunked as boolean);
        expect([answer.status, JSON.parse(answer.text)]).toEqual([413, { error_message: 'Request body is too large' }]);
      }
      expect((await api.raw().get('/api/health')).status).toBe(200);
    });

    it.each([
      ['a request line that is not HTTP', 'GARBAGE\r\n\r\n', 400],
      ['both Content-Length and chunked', 'POST /api/public/get_users HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n', 400],
      ['a NUL in a header', 'POST /api/public/get_users HTTP/1.1\r\nhost: a\r\nx-a: b\u0000c\r\ncontent-length: 0\r\n\r\n', 400],
      ['headers larger than Node accepts', `GET /api/health HTTP/1.1\r\nhost: a\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ])('%s: answered as JSON with error_message too (Node refuses it before any route)', async (_what, bytes, status) => {
      const answer = await rawExchange(baseUrl, bytes as string);
      expect(answer.status).toBe(status);
      checkAnswer(answer);
    });

    it('a declared 1 GiB body is refused with 413 at once, without waiting for it', async () => {
      const answer = await postDeclaredOnly(baseUrl, '/api/public/get_users', 1024 ** 3);
      expect([answer.status, JSON.parse(answer.text)]).toEqual([413, { error_message: 'Request body is too large' }]);
    });
  });

  it('derives a body shape for every routed operation that takes a body', () => {
    const withBody = [...bodies.entries()].filter(([, dto]) => dto !== null);
    expect(withBody.length).toBeGreaterThan(10);
    const createUser = shapeOf(bodies.get('create_user') as new () => object);
    expect(createUser.target_user).toMatchObject({ kind: 'object', fields: { username: { kind: 'string' }, locked: { kind: 'boolean' } } });
  });

  it.each(CATALOG.map((op, index) => [op, index]))('%s: no 5xx, errors are JSON with error_message, the api stays healthy', async (op, index) => {
    const dto = bodies.get(op as string);
    const shape = dto ? shapeOf(dto) : {};
    const seed = BASE_SEED + (index as number);
    await fc.assert(
      fc.asyncProperty(planFor(shape), async (plan) => {
        const { headers, body } = materialize(plan);
        const answer = await post(baseUrl, `/api/public/${op}`, headers, body);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        checkAnswer(answer);
      }),
      { seed, numRuns: RUNS_PER_OPERATION, verbose: 1 },
    );
    expect((await api.raw().get('/api/health')).status).toBe(200);
    expect((await api.call('get_images', admin)).status).toBe(200);
  });

  it('reached every layer: handlers (2xx), authentication (401), validation (400), limits (413), unrouted (404); no 415 on /api/public', () => {
    // On failure the whole tally shows.
    const tally = Object.fromEntries([...statuses].map(([status, count]) => [String(status), count]));
    // 404 only while some catalog operation has no route (every one is routed since egress).
    const unrouted = CATALOG.some((op) => !bodies.has(op));
    expect(tally).toEqual(expect.objectContaining({ 200: expect.any(Number), 400: expect.any(Number), 401: expect.any(Number), 413: expect.any(Number), ...(unrouted ? { 404: expect.any(Number) } : {}) }));
    // /api/public reads every body as JSON, whatever its Content-Type (integrators post with `curl -d`).
    expect(tally['415']).toBeUndefined();
    expect([...statuses.keys()].filter((status) => status >= 500)).toEqual([]);
    // Every run of every operation sent its request and got an answer.
    expect([...statuses.values()].reduce((sum, count) => sum + count, 0)).toBe(CATALOG.length * RUNS_PER_OPERATION);
  });
});
