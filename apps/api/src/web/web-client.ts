import { createReadStream, existsSync, readdirSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname, extname, join, resolve, sep } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * The browser client: `apps/web/public` at `/` (the single page; `GET /` answers `index.html`) and noVNC's
 * ES modules at `/novnc/` (`/novnc/core/rfb.js` and its relative imports under `core/` and `vendor/`).
 *
 * The files are enumerated once, here, and each gets a plain GET/HEAD route: there is no catch-all route,
 * so no path outside those files (in particular no `/api/...` path) is shadowed, an unknown path still
 * reaches Nest's not-found handler (the api's error shape), and no request path is ever mapped onto the
 * file system (nothing to traverse). The routes are fastify's, outside Nest, so the api's global guard
 * does not apply to them; they are public by nature.
 *
 * Call it on the adapter's fastify instance before the application is initialised (fastify refuses new
 * routes once it is ready): `await registerWebClient(adapter.getInstance())` in createApi.
 *
 * Why not @fastify/static: version 10 `require`s content-disposition 3, an ES-module-only package. Node
 * ≥ 20.19 loads that, but jest's module loader does not (jest.config.js now compiles it, for the queue
 * dashboard's @bull-board/fastify, which brings @fastify/static). The subset we need (a fixed set of files,
 * ETag revalidation, types and security headers) is small enough to serve directly.
 */
export async function registerWebClient(fastify: FastifyInstance, options: { captchaScriptUrl?: string } = {}): Promise<void> {
  const csp = clientCsp(options.captchaScriptUrl);
  const root = findRepoRoot(__dirname);
  const publicDir = join(root, 'apps', 'web', 'public');
  const novncDir = join(root, 'node_modules', '@novnc', 'novnc');
  if (!existsSync(join(publicDir, 'index.html'))) throw new Error(`browser client not found: ${join(publicDir, 'index.html')} is missing`);
  if (!existsSync(join(novncDir, 'core', 'rfb.js'))) throw new Error(`noVNC not found: ${join(novncDir, 'core', 'rfb.js')} is missing (npm ci)`);

  const routes = new Map<string, string>();
  routes.set('/', join(publicDir, 'index.html'));
  for (const file of listFiles(publicDir)) routes.set(`/${file}`, join(publicDir, file));
  // Only the library itself (core/ and vendor/), and only what a browser loads from it.
  for (const file of listFiles(novncDir)) {
    if ((file.startsWith('core/') || file.startsWith('vendor/')) && (file.endsWith('.js') || file.endsWith('.wasm'))) routes.set(`/novnc/${file}`, join(novncDir, file));
  }
  for (const [url, path] of routes) {
    fastify.route({ method: ['GET', 'HEAD'], url, handler: (request, reply) => serveFile(request, reply, path, csp) });
  }
}

/**
 * The single page's policy: scripts, styles, images, fonts and connections from this origin only (`'self'`
 * covers ws:/wss: to the same host and port in CSP level 3 browsers), images also as data:/blob: (noVNC
 * draws its cursor from a data URL), no plugins, no inline scripts, no <base> or form posts. There is no
 * frame-ancestors: the service may be embedded in an iframe on another domain (spec, convention 7).
 * With the captcha provider's scripts and frames allowed when a captcha script is configured (the
 * client loads it only for a casting link that requires a captcha). reCAPTCHA gets the paths Google documents
 * for it (its script loads more of itself from www.gstatic.com, its frames come from www.google.com and
 * recaptcha.google.com), not the whole origins; any other provider (a test's loopback stand-in) its origin.
 */
export function clientCsp(captchaScriptUrl?: string): string {
  const captcha = captchaSources(captchaScriptUrl);
  return [
    "default-src 'none'",
    ['script-src', "'self'", ...captcha.scripts].join(' '),
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

const TYPES: Record<string, string> = {
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

export async function serveFile(request: FastifyRequest, reply: FastifyReply, path: string, csp: string): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch {
    return reply.callNotFound();
  }
  if (!info.isFile()) return reply.callNotFound();
  const etag = `W/"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`;
  const type = TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
  // No file name carries a version, so every response is revalidated (the ETag makes that a 304): an
  // upgrade never leaves a browser with a stale mix of modules.
  reply.header('cache-control', 'no-cache');
  reply.header('etag', etag);
  reply.header('last-modified', info.mtime.toUTCString());
  reply.header('x-content-type-options', 'nosniff');
  if (type.startsWith('text/html')) {
    reply.header('content-security-policy', csp);
    // Connection links carry a JWT in the fragment: never pass any part of the address on.
    reply.header('referrer-policy', 'no-referrer');
  }
  if (matchesEtag(request.headers['if-none-match'], etag)) {
    reply.code(304);
    return reply.send();
  }
  reply.type(type);
  reply.header('content-length', info.size);
  if (request.method === 'HEAD') return reply.send();
  return reply.send(createReadStream(path));
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
