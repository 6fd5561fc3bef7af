import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { buildSync, version as esbuildVersion } from 'esbuild';

/**
 * The browser client's two bundles, made at start from the files the api serves: `client.js`, the page's script
 * (apps/web/public/app.js and its imports), and `viewer.js`, noVNC (core/rfb.js and its ~45 modules). A fresh
 * browser then fetches two files instead of fifty, with no import level waiting on the one before it: on this
 * 2-core machine the module-by-module load took 0.45 s before the page's first line ran and 0.9 s more before noVNC
 * was ready (issue 25). Minified, since the browser parses every byte; the sources stay served unbundled at their
 * plain paths, which is where a reader of the page's code looks.
 */
export const CLIENT_BUNDLE = 'client.js';
export const VIEWER_BUNDLE = 'viewer.js';

const BUILD_OPTIONS = { bundle: true, format: 'esm', platform: 'browser', target: 'es2022', minify: true, legalComments: 'none' } as const;

/** One ES module holding `entry` and everything it imports statically (a dynamic import of a computed url is left to the browser). */
export function bundleModule(entry: string, banner: string): Buffer {
  return build(entry, banner).body;
}

function build(entry: string, banner: string): { body: Buffer; inputs: string[] } {
  const result = buildSync({ ...BUILD_OPTIONS, entryPoints: [entry], banner: { js: banner }, write: false, outdir: 'bundle', logLevel: 'silent', metafile: true });
  if (result.outputFiles.length !== 1) throw new Error(`bundling ${entry} gave ${result.outputFiles.length} files`);
  // The metafile names inputs relative to the working directory.
  return { body: Buffer.from(result.outputFiles[0].contents), inputs: Object.keys(result.metafile.inputs).map((input) => resolve(input)) };
}

/**
 * bundleModule, kept in `cacheDir` under a digest of everything that makes it: esbuild's version and options, the
 * entry, the banner and the contents of `sources` (the files the api serves, read by the caller). The next start
 * with the same files (a restart, another api process, each e2e suite's api) reads the bundle instead of running
 * esbuild, about half a second of a start on this 2-core machine. A bundle is kept only when every file esbuild read
 * for it is one of `sources`, so no input outside the digest can change it unseen. Best effort: a cache that
 * cannot be read or written (a read-only image) means bundling at each start. The directory is the deployment's own
 * (node_modules/.cache), never a shared temporary one: what is in it is served to browsers as the client's code.
 */
export function cachedBundle(entry: string, banner: string, sources: ReadonlyArray<{ path: string; body: Buffer }>, cacheDir: string): Buffer {
  const digest = createHash('sha256').update(JSON.stringify({ esbuildVersion, BUILD_OPTIONS, entry: resolve(entry), banner }));
  for (const { path, body } of [...sources].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) digest.update(resolve(path)).update('\0').update(body).update('\0');
  const stem = `${basename(entry, '.js')}-`;
  const file = join(cacheDir, `${stem}${digest.digest('hex').slice(0, 32)}.js`);
  try {
    return readFileSync(file);
  } catch {
    // Not made yet (or unreadable): made now.
  }
  const made = build(entry, banner);
  const known = new Set(sources.map(({ path }) => resolve(path)));
  if (made.inputs.every((input) => known.has(input))) keep(file, stem, made.body);
  return made.body;
}

/** Writes the bundle whole (a temporary name, then a rename) and drops older bundles of the same entry. */
function keep(file: string, stem: string, body: Buffer): void {
  const dir = dirname(file);
  try {
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${randomBytes(6).toString('hex')}.partial`;
    writeFileSync(partial, body);
    renameSync(partial, file);
    for (const old of readdirSync(dir)) {
      if (old.startsWith(stem) && old !== basename(file) && !old.endsWith('.partial')) unlinkSync(join(dir, old));
    }
  } catch {
    // Not kept: the next start bundles again.
  }
}
