import { createHash } from 'node:crypto';
import { extname } from 'node:path';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlibConstants, gzip } from 'node:zlib';

const brotli = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

export const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
};

/** Below this a compressed body saves less than its headers cost. */
const MIN_COMPRESSED_SIZE = 1024;
/** Brotli's quality for text assets: close to the best ratio at a fraction of quality 11's time (each asset is compressed once). */
const BROTLI_QUALITY = 9;

export type ContentEncoding = 'br' | 'gzip';

/** One file of the browser client, held in memory with its ETag (weak: the same for each encoding) and its compressed forms (made on first use). */
export class WebAsset {
  readonly etag: string;
  readonly type: string;
  private readonly encoded = new Map<ContentEncoding, Promise<Buffer>>();

  constructor(readonly body: Buffer, name: string) {
    this.type = CONTENT_TYPES[extname(name).toLowerCase()] ?? 'application/octet-stream';
    this.etag = `W/"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
  }

  get compressible(): boolean {
    return this.body.length >= MIN_COMPRESSED_SIZE && /^(text\/|application\/(json|javascript|wasm)|image\/svg)/.test(this.type);
  }

  /** The body in `encoding`, compressed once and kept (a failure is not kept: the next request tries again). */
  encode(encoding: ContentEncoding): Promise<Buffer> {
    let done = this.encoded.get(encoding);
    if (!done) {
      done = encoding === 'br'
        ? brotli(this.body, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: this.body.length } })
        : gzipAsync(this.body, { level: 9 });
      done.catch(() => this.encoded.delete(encoding));
      this.encoded.set(encoding, done);
    }
    return done;
  }
}

/** The best encoding the request's Accept-Encoding allows for `asset` (brotli before gzip), or null for the identity. */
export function negotiateEncoding(acceptEncoding: string | undefined, asset: WebAsset): ContentEncoding | null {
  if (!acceptEncoding || !asset.compressible) return null;
  const accepted = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
    accepted.set(name.trim(), q === undefined ? 1 : Number(q));
  }
  const allowed = (name: string) => (accepted.get(name) ?? accepted.get('*') ?? 0) > 0;
  if (allowed('br')) return 'br';
  if (allowed('gzip')) return 'gzip';
  return null;
}

/**
 * The files of the browser client, as read (once, by the caller), and files made from them (the bundles): name (relative url path,
 * e.g. `app.js`, `novnc/core/rfb.js`, `client.js`) → asset, and a version: a digest of every name and content,
 * which names the immutable url prefix. A change to any file (an upgrade) gives a new prefix, so a browser never
 * mixes files of two versions.
 */
export class WebAssets {
  readonly files = new Map<string, WebAsset>();
  readonly version: string;

  constructor(sources: Iterable<[name: string, body: Buffer]>, made: Iterable<[name: string, body: Buffer]> = []) {
    const all: Array<[string, Buffer]> = [...sources, ...made];
    const digest = createHash('sha256');
    for (const [name, body] of all.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (this.files.has(name)) throw new Error(`two browser client files are named ${name}`);
      const asset = new WebAsset(body, name);
      this.files.set(name, asset);
      digest.update(name).update('\0').update(asset.etag).update('\0');
    }
    this.version = digest.digest('hex').slice(0, 16);
  }
}
