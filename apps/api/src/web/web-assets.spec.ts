import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { negotiateEncoding, WebAsset, WebAssets } from './web-assets';
import { bundleModule, cachedBundle } from './web-bundles';

describe('web assets', () => {
  it('versions the set of files, read and made, by content, and refuses two files of one name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'web-assets-'));
    writeFileSync(join(dir, 'app.js'), "import './ui.js';");
    writeFileSync(join(dir, 'ui.js'), '');
    const sources = (): Array<[string, Buffer]> => ['app.js', 'ui.js'].map((name): [string, Buffer] => [name, readFileSync(join(dir, name))]);
    const made = (text: string): Array<[string, Buffer]> => [['client.js', Buffer.from(text)]];
    const assets = new WebAssets(sources(), made('bundle'));
    expect([...assets.files.keys()]).toEqual(['app.js', 'client.js', 'ui.js']);
    expect(new WebAssets(sources(), made('bundle')).version).toBe(assets.version);
    expect(new WebAssets(sources(), made('another bundle')).version).not.toBe(assets.version);
    writeFileSync(join(dir, 'ui.js'), '// changed');
    expect(new WebAssets(sources(), made('bundle')).version).not.toBe(assets.version);
    expect(() => new WebAssets(sources(), [['ui.js', Buffer.from('')]])).toThrow(/two browser client files are named ui.js/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('bundles a module and its static imports into one minified ES module, leaving a computed dynamic import alone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'web-bundle-'));
    writeFileSync(join(dir, 'entry.js'), "import { greet } from './lib/greet.js';\nconst later = document.body.dataset.url;\nexport default greet('world');\nexport const load = () => import(later);\n");
    mkdirSync(join(dir, 'lib'));
    writeFileSync(join(dir, 'lib', 'greet.js'), 'export function greet(name) {\n  return `hello ${name}`;\n}\n');
    const bundle = bundleModule(join(dir, 'entry.js'), '/* banner */').toString('utf8');
    expect(bundle.startsWith('/* banner */')).toBe(true);
    expect(bundle).toContain('hello ');
    expect(bundle).not.toMatch(/from\s*["']\.\/lib/);
    expect(bundle).toMatch(/import\(\w+\)/);
    expect(bundle).toMatch(/export\s*\{/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps a bundle by a digest of its inputs: the same files read it back, a changed file or one outside the sources makes it again', () => {
    const dir = mkdtempSync(join(tmpdir(), 'web-bundle-cache-'));
    const cache = join(dir, 'cache');
    const entry = join(dir, 'entry.js');
    const lib = join(dir, 'lib.js');
    writeFileSync(entry, "import { n } from './lib.js';\nexport default n;\n");
    writeFileSync(lib, 'export const n = 41 + 1;\n');
    const sources = () => [entry, lib].map((path) => ({ path, body: readFileSync(path) }));
    const first = cachedBundle(entry, '/* b */', sources(), cache);
    expect(first.equals(bundleModule(entry, '/* b */'))).toBe(true);
    const [kept] = readdirSync(cache);
    expect(kept).toMatch(/^entry-[0-9a-f]{32}\.js$/);
    // Read back, not made again: what the cache holds is what comes out.
    writeFileSync(join(cache, kept), '/* from the cache */');
    expect(cachedBundle(entry, '/* b */', sources(), cache).toString()).toBe('/* from the cache */');
    // Another banner or a changed input is another bundle; the older one of the entry goes.
    expect(cachedBundle(entry, '/* c */', sources(), cache).toString()).toMatch(/^\/\* c \*\//);
    writeFileSync(lib, 'export const n = 7;\n');
    expect(cachedBundle(entry, '/* b */', sources(), cache).toString()).toContain('7');
    expect(readdirSync(cache)).toHaveLength(1);
    // An input esbuild read that is not among the sources: bundled, not kept.
    rmSync(cache, { recursive: true, force: true });
    expect(cachedBundle(entry, '/* b */', [{ path: entry, body: readFileSync(entry) }], cache).toString()).toContain('7');
    expect(() => readdirSync(cache)).toThrow();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prefers brotli, then gzip, honours q=0, and leaves small or binary files alone', async () => {
    const big = new WebAsset(Buffer.from('export const x = 1;\n'.repeat(200)), 'app.js');
    expect(negotiateEncoding('gzip, deflate, br', big)).toBe('br');
    expect(negotiateEncoding('gzip;q=1, br;q=0', big)).toBe('gzip');
    expect(negotiateEncoding('identity', big)).toBeNull();
    expect(negotiateEncoding(undefined, big)).toBeNull();
    expect(negotiateEncoding('*', big)).toBe('br');
    expect(negotiateEncoding('br', new WebAsset(Buffer.from('tiny'), 'a.js'))).toBeNull();
    expect(negotiateEncoding('br', new WebAsset(Buffer.alloc(4096), 'x.png'))).toBeNull();
    expect(brotliDecompressSync(await big.encode('br')).equals(big.body)).toBe(true);
    expect(gunzipSync(await big.encode('gzip')).equals(big.body)).toBe(true);
    expect(await big.encode('br')).toBe(await big.encode('br'));
  });
});
