/**
 * npm test's e2e groups (test/e2e/groups.js) name real files, each at most once, and the early group (run while the
 * images build) holds only suites that use no image: none names an image helper or imports a helper module that does.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- plain CommonJS shared with jest.config.js
const { E2E_ALONE_LANES, E2E_EARLY } = require('../e2e/groups') as { E2E_ALONE_LANES: Record<string, string[]>; E2E_EARLY: string[] };

const E2E_DIR = join(__dirname, '..', 'e2e');
const SUITE = /\.e2e-spec\.ts$/;
/** The harness's image helpers, the browser suites' start (it takes the desktop image), an image's variable or script. */
const IMAGE_HELPER = /\b(?:desktopImage|browserImage|egressImage|testServersImage|startBrowserSuiteApi)\b|WS_TEST_[A-Z]+_IMAGE|build-[a-z-]+-images?\.sh/;

const source = (file: string) => readFileSync(join(E2E_DIR, file), 'utf8');
const suites = readdirSync(E2E_DIR).filter((file) => SUITE.test(file)).map((file) => file.replace(SUITE, ''));
/** Helper modules (not suites, not the harness that defines the helpers, not browser.ts whose use is by name) that take an image. */
const imageTakingHelpers = readdirSync(E2E_DIR)
  .filter((file) => file.endsWith('.ts') && !SUITE.test(file) && !['harness.ts', 'browser.ts'].includes(file))
  .filter((file) => IMAGE_HELPER.test(source(file)))
  .map((file) => file.replace(/\.ts$/, ''));

describe('e2e groups', () => {
  const grouped = [...E2E_EARLY, ...Object.values(E2E_ALONE_LANES).flat()];

  it('name existing suites, each in one group at most', () => {
    expect(grouped.filter((name) => !suites.includes(name))).toEqual([]);
    expect(grouped.filter((name, index) => grouped.indexOf(name) !== index)).toEqual([]);
  });

  it('finds the helper modules that take an image (so the next check can fail)', () => {
    expect(imageTakingHelpers).toEqual(expect.arrayContaining(['audio-fixtures', 'two-engine-deployment']));
  });

  it.each(E2E_EARLY)('early suite %s uses no image', (name) => {
    const text = source(`${name}.e2e-spec.ts`);
    expect(text.match(IMAGE_HELPER)?.[0] ?? null).toBeNull();
    const imported = [...text.matchAll(/from '\.\/([a-z0-9-]+)'/g)].map((match) => match[1]);
    expect(imported.filter((module) => imageTakingHelpers.includes(module))).toEqual([]);
  });
});
