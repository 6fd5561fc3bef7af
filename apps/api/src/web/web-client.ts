import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname, extname, join, resolve, sep } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CONTENT_TYPES, negotiateEncoding, WebAsset, WebAssets } from './web-assets';
import { cachedBundle, CLIENT_BUNDLE, VIEWER_BUNDLE } from './web-bundles';

/**
 * The browser client: `apps/web/public` at `/` (the single page; `GET /` answers `index.html`) and noVNC's
 * ES modules at `/novnc/` (`/novnc/core/rfb.js` and its relative imports under `core/` and `vendor/`).
 *
 * The files are read once, here, and each gets plain GET/HEAD routes: there is no catch-all route, so no path
 * outside those files (in particular no `/api/...` path) is shadowed, an unknown path still reaches Nest's
 * not-found handler (the api's error shape), and no request path is ever mapped onto the file system (nothing
 * to traverse). The routes are fastify's, outside Nest, so the api's global guard does not apply to them; they
 * are public by nature.
 *
 * Every file is served twice: at its plain path, revalidated on every use (`no-cache`, a content ETag), and under
 * `/assets/<version>/`, where `<version>` is a digest of all the files: cached for good (`immutable`), since a
 * change to any file gives another prefix. Under the prefix there are also the two bundles made at start, or read
 * from node_modules/.cache when these files made them before (web-bundles.ts): `client.js`, the page's script and its imports, and `viewer.js`, noVNC. The page (never cached:
 * it names the current prefix) loads `client.js` and its style from the prefix, preloads `viewer.js` beside it and
 * names it in `<meta name="viewer-module">` for the client's dynamic import: a fresh browser fetches three files,
 * all at once. Text files go out brotli- or gzip-compressed when the browser accepts it (each compressed once, on
 * first use, and kept).
 *
 * Call it on the adapter's fastify instance before the application is initialised (fastify refuses new
 * routes once it is ready): `await registerWebClient(adapter.getInstance())` in createApi. Files changed on disk
 * are served after a restart.
 *
 * Why not @fastify/static: version 10 `require`s content-disposition 3, an ES-module-only package. Node
 * ≥ 20.19 loads that, but jest's module loader does not (jest.config.js now compiles it, for the queue
 * dashboard's @bull-board/fastify, which brings @fastify/static). The subset we need (a fixed set of files,
 * ETag revalidation, types, compression and security headers) is small enough to serve directly.
 */
export async function registerWebClient(fastify: FastifyInstance, options: { captchaScriptUrl?: string } = {}): Promise<void> {
  const root = findRepoRoot(__dirname);
  const publicDir = join(root, 'apps', 'web', 'public');
  const novncDir = join(root, 'node_modules', '@novnc', 'novnc');
  if (!existsSync(join(publicDir, 'index.html'))) throw new Error(`browser client not found: ${join(publicDir, 'index.html')} is missing`);
  const viewerEntry = join(novncDir, 'core', 'rfb.js');
  if (!existsSync(viewerEntry)) throw new Error(`noVNC not found: ${viewerEntry} is missing (npm ci)`);

  const sources: Array<[string, string]> = listFiles(publicDir).filter((file) => file !== 'index.html').map((file) => [file, join(publicDir, file)]);
  // Only the library itself (core/ and vendor/), and only what a browser loads from it.
  for (const file of listFiles(novncDir)) {
    if ((file.startsWith('core/') || file.startsWith('vendor/')) && (file.endsWith('.js') || file.endsWith('.wasm'))) sources.push([`${NOVNC_PREFIX}${file}`, join(novncDir, file)]);
  }
  const novncVersion = (JSON.parse(readFileSync(join(novncDir, 'package.json'), 'utf8')) as { version: string }).version;
  // Read once: served as they are, and the digest of the bundles made from them.
  const read = sources.map(([name, path]) => ({ name, path, body: readFileSync(path) }));
  const bundleCache = join(root, 'node_modules', '.cache', 'workspace-server', 'web-bundles');
  const assets = new WebAssets(read.map(({ name, body }): [string, Buffer] => [name, body]), [
    [CLIENT_BUNDLE, cachedBundle(join(publicDir, CLIENT_ENTRY), `/* workspace-server browser client; sources at /${CLIENT_ENTRY} and its imports */`, read, bundleCache)],
    [VIEWER_BUNDLE, cachedBundle(viewerEntry, `/*! noVNC ${novncVersion}, https://github.com/novnc/noVNC, MPL-2.0; sources at /${VIEWER_MODULE} and its imports */`, read, bundleCache)],
  ]);
  const prefix = `/assets/${assets.version}/`;
  const html = readFileSync(join(publicDir, 'index.html'), 'utf8');
  const csp = clientCsp(options.captchaScriptUrl, inlineScriptHashes(html));
  const page = new WebAsset(Buffer.from(renderPage(html, assets, prefix)), 'index.html');

  for (const url of ['/', '/index.html']) {
    fastify.route({ method: ['GET', 'HEAD'], url, handler: (request, reply) => sendAsset(request, reply, page, 'no-cache', csp) });
  }
  for (const [name, asset] of assets.files) {
    if (name !== CLIENT_BUNDLE && name !== VIEWER_BUNDLE) {
      fastify.route({ method: ['GET', 'HEAD'], url: `/${name}`, handler: (request, reply) => sendAsset(request, reply, asset, 'no-cache', csp) });
    }
    fastify.route({ method: ['GET', 'HEAD'], url: `${prefix}${name}`, handler: (request, reply) => sendAsset(request, reply, asset, IMMUTABLE, csp) });
  }
}

const NOVNC_PREFIX = 'novnc/';
/** noVNC's entry, whose graph is the viewer bundle (and what app.js imports, unbundled). */
const VIEWER_MODULE = `${NOVNC_PREFIX}core/rfb.js`;
/** The page's script, whose graph is the client bundle. */
const CLIENT_ENTRY = 'app.js';
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * index.html with its own references (`href="/style.css"`, `src="/app.js"`) moved under the versioned prefix, its
 * script replaced by the client bundle, and, before `</head>`, the viewer bundle preloaded and named in
 * `<meta name="viewer-module">` (one file, so its fetch does not hold up the client's first call for a connection).
 */
function renderPage(html: string, assets: WebAssets, prefix: string): string {
  const versioned = html.replace(/\b(href|src)="\/([^"]+)"/g, (whole, attribute: string, name: string) => {
    if (name === CLIENT_ENTRY) return `${attribute}="${prefix}${CLIENT_BUNDLE}"`;
    return assets.files.has(name) ? `${attribute}="${prefix}${name}"` : whole;
  });
  if (!versioned.includes(`src="${prefix}${CLIENT_BUNDLE}"`)) throw new Error(`index.html does not load /${CLIENT_ENTRY}`);
  const viewer = `${prefix}${VIEWER_BUNDLE}`;
  return versioned.replace('</head>', `  <link rel="modulepreload" href="${viewer}">\n  <meta name="viewer-module" content="${viewer}">\n</head>`);
}

/**
 * CSP sources (`'sha256-…'`) for the page's inline scripts, exactly as written: the page's own early connect call
 * (index.html) runs before any file loads; no other inline script can.
 */
export function inlineScriptHashes(html: string): string[] {
  return [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(([, body]) => `'sha256-${createHash('sha256').update(body, 'utf8').digest('base64')}'`);
}

async function sendAsset(request: FastifyRequest, reply: FastifyReply, asset: WebAsset, cacheControl: string, csp: string): Promise<void> {
  if (asset.compressible) reply.header('vary', 'accept-encoding');
  if (answeredFromCache(request, reply, { type: asset.type, etag: asset.etag, cacheControl, csp })) return reply.send();
  const encoding = negotiateEncoding(request.headers['accept-encoding'], asset);
  const body = encoding ? await asset.encode(encoding) : asset.body;
  reply.type(asset.type);
  if (encoding) reply.header('content-encoding', encoding);
  reply.header('content-length', body.length);
  if (request.method === 'HEAD') return reply.send();
  return reply.send(body);
}

/**
 * The single page's policy: scripts, styles, images, fonts and connections from this origin only (`'self'`
 * covers ws:/wss: to the same host and port in CSP level 3 browsers), images also as data:/blob: (noVNC
 * draws its cursor from a data URL), no plugins, no inline scripts but the page's own (`inlineScripts`: their
 * hashes), no <base> or form posts. There is no
 * frame-ancestors: the service may be embedded in an iframe on another domain (spec, convention 7).
 * With the captcha provider's scripts and frames allowed when a captcha script is configured (the
 * client loads it only for a casting link that requires a captcha). reCAPTCHA gets the paths Google documents
 * for it (its script loads more of itself from www.gstatic.com, its frames come from www.google.com and
 * recaptcha.google.com), not the whole origins; any other provider (a test's loopback stand-in) its origin.
 */
export function clientCsp(captchaScriptUrl?: string, inlineScripts: string[] = []): string {
  const captcha = captchaSources(captchaScriptUrl);
  return [
    "default-src 'none'",
    ['script-src', "'self'", ...inlineScripts, ...captcha.scripts].join(' '),
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    "connect-src 'self'",
    "media-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    ...(captcha.frames.length ? [['frame-src', ...captcha.frames].join(' ')] : []),
  ].join('; ');
}

function captchaSources(scriptUrl: string | undefined): { scripts: string[]; frames: string[] } {
  let url: URL | null = null;
  try {
    url = scriptUrl ? new URL(scriptUrl) : null;
  } catch {
    url = null;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) return { scripts: [], frames: [] };
  if (url.origin === 'https://www.google.com') {
    return { scripts: ['https://www.google.com/recaptcha/', 'https://www.gstatic.com/recaptcha/'], frames: ['https://www.google.com/recaptcha/', 'https://recaptcha.google.com/recaptcha/'] };
  }
  return { scripts: [url.origin], frames: [url.origin] };
}

/** A file read from disk at each request (the api reference's files), revalidated at each use. */
export async function serveFile(request: FastifyRequest, reply: FastifyReply, path: string, csp: string): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch {
    return reply.callNotFound();
  }
  if (!info.isFile()) return reply.callNotFound();
  const etag = `W/"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`;
  const type = CONTENT_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
  reply.header('last-modified', info.mtime.toUTCString());
  // No file name carries a version, so every response is revalidated (the ETag makes that a 304).
  if (answeredFromCache(request, reply, { type, etag, cacheControl: 'no-cache', csp })) return reply.send();
  reply.type(type);
  reply.header('content-length', info.size);
  if (request.method === 'HEAD') return reply.send();
  return reply.send(createReadStream(path));
}

/**
 * Sets the headers every static answer carries (caching, ETag, nosniff; the page's CSP and referrer policy) and
 * answers true, with status 304, when the request's If-None-Match already names this version.
 */
function answeredFromCache(request: FastifyRequest, reply: FastifyReply, file: { type: string; etag: string; cacheControl: string; csp: string }): boolean {
  reply.header('cache-control', file.cacheControl);
  reply.header('etag', file.etag);
  reply.header('x-content-type-options', 'nosniff');
  if (file.type.startsWith('text/html')) {
    reply.header('content-security-policy', file.csp);
    // Connection links carry a JWT in the fragment: never pass any part of the address on.
    reply.header('referrer-policy', 'no-referrer');
  }
  if (!matchesEtag(request.headers['if-none-match'], file.etag)) return false;
  reply.code(304);
  return true;
}

function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((candidate) => {
    const c = candidate.trim();
    return c === '*' || c.replace(/^W\//, '') === bare;
  });
}

/** Regular files under `dir`, relative, with '/' separators; dotfiles and dot-directories are skipped. */
function listFiles(dir: string, prefix = ''): string[] {
  const files: string[] = [];
  for (const name of readdirSync(join(dir, prefix)).sort()) {
    if (name.startsWith('.')) continue;
    const rel = prefix ? `${prefix}/${name}` : name;
    const info = statSync(join(dir, rel));
    if (info.isDirectory()) files.push(...listFiles(dir, rel));
    else if (info.isFile()) files.push(rel.split(sep).join('/'));
  }
  return files;
}

/** The directory holding package.json and apps/, walking up from `start` (apps/api/src/web in ts, dist/apps/api/src/web compiled). */
export function findRepoRoot(start: string): string {
  let dir = resolve(start);
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'apps', 'web', 'public'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find the repository root (package.json and apps/web/public) above ${start}`);
    dir = parent;
  }
}
