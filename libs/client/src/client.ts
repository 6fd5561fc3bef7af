import type { operations, paths } from './generated/openapi';
import { CREATING_OPERATIONS, PAGED_OPERATIONS } from './operations';

type PublicPath = Extract<keyof paths, `/api/public/${string}`>;
/** Every operation of the developer API (`POST /api/public/<name>`), from the OpenAPI document. */
export type OperationName = PublicPath extends `/api/public/${infer Name}` ? Extract<Name, keyof operations> : never;

type Credentials = 'api_key' | 'api_key_secret';
type JsonBody<T> = T extends { requestBody: { content: { 'application/json': infer B } } } ? B : never;
type Success<T> = T extends { responses: { 200: { content: infer C } } } ? C : never;

/** The body of an operation, without the credentials (the client adds them). */
export type RequestOf<N extends OperationName> = Omit<JsonBody<operations[N]>, Credentials>;
/** The answer of an operation: its JSON, or the bytes for an operation that answers bytes (a screenshot). */
export type ResponseOf<N extends OperationName> = Success<operations[N]> extends { 'application/json': infer R } ? R : Uint8Array;

type NoRequiredFields<T> = object extends T ? true : false;

export interface CallOptions {
  /** For a creating operation: the key to send (default: a new random UUID), reused on every retry of this call. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** One method per operation; an operation whose body has no required field may be called without one. */
export type OperationMethods = {
  [N in OperationName]: NoRequiredFields<RequestOf<N>> extends true
    ? (body?: RequestOf<N>, options?: CallOptions) => Promise<ResponseOf<N>>
    : (body: RequestOf<N>, options?: CallOptions) => Promise<ResponseOf<N>>;
};

export type PagedOperation = Extract<(typeof PAGED_OPERATIONS)[number], OperationName>;
type ArrayItems<T> = { [K in keyof T]: T[K] extends ReadonlyArray<infer I> ? I : never }[keyof T];
/** The items of a paged list (`users` of get_users, …). */
export type ItemOf<N extends PagedOperation> = ArrayItems<ResponseOf<N>>;

export interface RetryPolicy {
  /** Attempts in all, the first included (default 4). */
  attempts: number;
  /** First backoff when the answer has no Retry-After (default 250 ms), doubled each time, with jitter. */
  baseDelayMs: number;
  /** Longest backoff, and longest Retry-After the client waits for; a longer one ends the retries (default 30 s). */
  maxDelayMs: number;
}

export interface ClientOptions {
  /** Where the api is: `https://workspaces.example.org` (the client appends `/api/public/<operation>`). */
  baseUrl: string;
  apiKey: string;
  apiKeySecret: string;
  retry?: Partial<RetryPolicy>;
  /** Bound on one attempt (default 60 s). */
  timeoutMs?: number;
  /** Another fetch (tests, proxies); default the global one. */
  fetch?: typeof fetch;
}

/** A failed operation: the HTTP status and the api's `error_message` (and any other fields it sent). */
export class WorkspaceApiError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    readonly body: { error_message?: string; [field: string]: unknown },
    readonly retryAfterSeconds: number | null,
  ) {
    super(`${operation}: ${status} ${body.error_message ?? '(no error_message)'}`);
    this.name = 'WorkspaceApiError';
  }
}

const RETRIED = new Set([429, 503]);
const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 250, maxDelayMs: 30_000 };
const MAX_PAGES = 100_000;
const OPERATION_NAME = /^[a-z][a-z0-9_]*$/;

export type WorkspaceClient = OperationMethods & ClientCore;

/** A client for the developer API: credentials set once, one method per operation (`client.create_user({...})`). */
export function createClient(options: ClientOptions): WorkspaceClient {
  const core = new ClientCore(options);
  return new Proxy(core, {
    get(target, property, receiver) {
      // Not `then`: the client must not look like a promise (awaiting it, or returning it from an async function, would call it).
      if (typeof property !== 'string' || property in target || !OPERATION_NAME.test(property) || property === 'then') return Reflect.get(target, property, receiver) as unknown;
      return (body?: object, callOptions?: CallOptions) => target.call(property as OperationName, body as never, callOptions);
    },
  }) as WorkspaceClient;
}

export class ClientCore {
  private readonly retry: RetryPolicy;
  private readonly fetchImpl: typeof fetch;
  private readonly baseUrl: string;

  constructor(private readonly options: ClientOptions) {
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    if (!Number.isInteger(this.retry.attempts) || this.retry.attempts < 1 || this.retry.attempts > 20) throw new RangeError('retry.attempts must be an integer from 1 to 20');
    this.fetchImpl = options.fetch ?? fetch;
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
  }

  /**
   * Calls an operation. 429 and 503 are retried (at most `retry.attempts` in all) after the answer's Retry-After,
   * or an exponential backoff with jitter; a creating operation carries one `Idempotency-Key` over all its attempts,
   * so a retry never makes a second thing. Any other failure throws a WorkspaceApiError at once.
   */
  async call<N extends OperationName>(operation: N, body?: RequestOf<N>, options: CallOptions = {}): Promise<ResponseOf<N>> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, */*' };
    if ((CREATING_OPERATIONS as readonly string[]).includes(operation)) headers['idempotency-key'] = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    const payload = JSON.stringify({ ...(body ?? {}), api_key: this.options.apiKey, api_key_secret: this.options.apiKeySecret });
    const url = `${this.baseUrl}/api/public/${operation}`;
    for (let attempt = 1; ; attempt++) {
      const signals = [AbortSignal.timeout(this.options.timeoutMs ?? 60_000), ...(options.signal ? [options.signal] : [])];
      const answer = await this.fetchImpl(url, { method: 'POST', headers, body: payload, signal: AbortSignal.any(signals) });
      if (answer.ok) return (await readAnswer(answer)) as ResponseOf<N>;
      const error = await toError(operation, answer);
      const wait = RETRIED.has(answer.status) && attempt < this.retry.attempts ? this.delayBefore(attempt, error.retryAfterSeconds) : null;
      if (wait === null) throw error;
      await sleep(wait, options.signal);
    }
  }

  /**
   * Every item of a paged list, page after page (`limit`, then `cursor` from each answer's `next_cursor`), until
   * `next_cursor` is null or absent. `for await (const user of client.paginate('get_users', { limit: 100 }))`.
   */
  async *paginate<N extends PagedOperation>(operation: N, body: RequestOf<N> & { limit?: number } = {} as RequestOf<N> & { limit?: number }, options: CallOptions = {}): AsyncGenerator<ItemOf<N>, void, undefined> {
    let cursor: string | null = null;
    const seen = new Set<string>();
    for (let page = 0; page < MAX_PAGES; page++) {
      const request = { limit: 100, ...body, ...(cursor === null ? {} : { cursor }) } as RequestOf<N>;
      const answer = (await this.call(operation, request, options)) as Record<string, unknown>;
      const list = Object.entries(answer).find(([, value]) => Array.isArray(value));
      if (!list) throw new Error(`${operation} answered no list`);
      for (const item of list[1] as Array<ItemOf<N>>) yield item;
      const next = answer.next_cursor;
      if (typeof next !== 'string') return;
      if (seen.has(next)) throw new Error(`${operation} answered the cursor ${next} twice`);
      seen.add(next);
      cursor = next;
    }
    throw new Error(`${operation} had more than ${MAX_PAGES} pages`);
  }

  /** Milliseconds to wait before attempt `attempt + 1`, or null when Retry-After asks for longer than maxDelayMs. */
  private delayBefore(attempt: number, retryAfterSeconds: number | null): number | null {
    if (retryAfterSeconds !== null) {
      const ms = retryAfterSeconds * 1000;
      return ms > this.retry.maxDelayMs ? null : ms;
    }
    const ceiling = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (attempt - 1));
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }
}

async function readAnswer(answer: Response): Promise<unknown> {
  const type = answer.headers.get('content-type') ?? '';
  if (/^application\/(.+\+)?json/i.test(type)) return answer.json();
  return new Uint8Array(await answer.arrayBuffer());
}

async function toError(operation: string, answer: Response): Promise<WorkspaceApiError> {
  const text = await answer.text();
  let body: WorkspaceApiError['body'];
  try {
    const parsed = JSON.parse(text) as unknown;
    body = parsed !== null && typeof parsed === 'object' ? (parsed as WorkspaceApiError['body']) : { error_message: text };
  } catch {
    body = { error_message: text.slice(0, 500) };
  }
  return new WorkspaceApiError(operation, answer.status, body, parseRetryAfter(answer.headers.get('retry-after')));
}

/** Retry-After in seconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - now) / 1000));
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
