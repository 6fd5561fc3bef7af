import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { negotiateEncoding, staticImports, WebAsset, WebAssets } from './web-assets';

describe('web assets', () => {
  it('finds the relative static imports and re-exports of a module, not bare or dynamic ones', () => {
    const source = [
      "import * as Log from './util/logging.js';",
      "import Websock from \"./websock.js\";",
      "import { a, b as c } from '../x/y.js';",
      "import './side-effect.js';",
      "export { default as z } from './z.js';",
      "export * from './all.js';",
      "import fs from 'node:fs';",
      "const later = import('./dynamic.js');",
      "const s = 'import x from ./nope.js';",
    ].join('\n');
    expect(staticImports(source)).toEqual(['./util/logging.js', './websock.js', '../x/y.js', './side-effect.js', './z.js', './all.js']);
  });

  it('lists a module graph from its entry, each module once, and versions the set by content', () => {
    const dir = mkdtempSync(join(tmpdir(), 'web-assets-'));
    const files: Record<string, string> = {
      'novnc/core/rfb.js': "import './util/a.js';\nimport '../vendor/b.js';",
      'novnc/core/util/a.js': "import '../../vendor/b.js';",
      'novnc/vendor/b.js': "import './missing.js';",
      'app.js': "import './ui.js';",
      'ui.js': '',
    };
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name.replace(/\//g, '_')), text);
    const sources = () => Object.keys(files).map((name): [string, string] => [name, join(dir, name.replace(/\//g, '_'))]);
    const assets = new WebAssets(sources());
    expect(assets.moduleGraph('novnc/core/rfb.js')).toEqual(['novnc/core/rfb.js', 'novnc/core/util/a.js', 'novnc/vendor/b.js']);
    expect(assets.moduleGraph('app.js')).toEqual(['app.js', 'ui.js']);
    expect(new WebAssets(sources()).version).toBe(assets.version);
    writeFileSync(join(dir, 'ui.js'), '// changed');
    expect(new WebAssets(sources()).version).not.toBe(assets.version);
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
